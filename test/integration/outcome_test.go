package integration

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hapsuper/hapsuper/test/harness"
)

// outcome is one request as the client saw it.
type outcome struct {
	start, end time.Time
	kind       harness.Kind
	status     int
	connClose  bool // the response carried Connection: close
	reused     bool // sent on a connection that had already served a request
	conn       int  // the client's sequence number of the connection (0: none)
	err        string
}

func (o outcome) String() string {
	s := fmt.Sprintf("%s %s conn=%d reused=%v status=%d close=%v",
		o.start.Format("15:04:05.000"), o.kind, o.conn, o.reused, o.status, o.connClose)
	if o.err != "" {
		s += " err=" + o.err
	}
	return s
}

// finish sets the end, the kind and the error of a request that returned
// err: a complete response is ok or 5xx by its status.
func (o *outcome) finish(err error) {
	o.end, o.kind = time.Now(), harness.ClassifyStatus(o.status)
	if err != nil {
		o.kind, o.err = harness.Classify(err), err.Error()
	}
}

// failed is a request started at start that failed with err before it was
// sent (dial).
func failed(start time.Time, err error) outcome {
	o := outcome{start: start}
	o.finish(err)
	return o
}

// recorder keeps every outcome of one client, safe for concurrent use.
type recorder struct {
	name string
	mu   sync.Mutex
	out  []outcome
}

func newRecorder(name string) *recorder { return &recorder{name: name} }

func (r *recorder) add(o outcome) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.out = append(r.out, o)
}

// all returns a copy of the outcomes in the order they were recorded.
func (r *recorder) all() []outcome {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]outcome(nil), r.out...)
}

// waitNext waits until an outcome beyond the n already recorded arrives, or
// bound passes; it reports whether one arrived. Tests use it to act right
// after a response, when the client's next request is a full interval away.
func (r *recorder) waitNext(n int, bound time.Duration) bool {
	deadline := time.Now().Add(bound)
	for time.Now().Before(deadline) {
		r.mu.Lock()
		got := len(r.out)
		r.mu.Unlock()
		if got > n {
			return true
		}
		time.Sleep(time.Millisecond)
	}
	return false
}

// where returns the outcomes for which keep is true.
func (r *recorder) where(keep func(outcome) bool) []outcome {
	var res []outcome
	for _, o := range r.all() {
		if keep(o) {
			res = append(res, o)
		}
	}
	return res
}

// checkNoFailures asserts that every request of each recorder succeeded.
func checkNoFailures(t *testing.T, recs ...*recorder) {
	t.Helper()
	for _, r := range recs {
		if bad := r.where(func(o outcome) bool { return o.kind != harness.KindOK }); len(bad) > 0 {
			t.Errorf("%s: %d failed requests:%s", r.name, len(bad), describe(bad, 5))
		}
	}
}

// lastStart is the start of the last request, zero when none was sent.
func (r *recorder) lastStart() time.Time {
	var last time.Time
	for _, o := range r.all() {
		if o.start.After(last) {
			last = o.start
		}
	}
	return last
}

// waitStartAfter waits, at most within, until a request that started after
// at has completed and is recorded: on a loaded machine a client can stall
// for half a second, and a test that means "a request during the drain"
// waits for one rather than guessing how long to sleep. It reports
// whether one came.
func (r *recorder) waitStartAfter(at time.Time, within time.Duration) bool {
	deadline := time.Now().Add(within)
	for {
		if r.lastStart().After(at) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// summary is a one-line count of outcomes by kind, for the test log.
func (r *recorder) summary() string {
	all := r.all()
	c := map[harness.Kind]int{}
	for _, o := range all {
		c[o.kind]++
	}
	parts := []string{fmt.Sprintf("%d requests", len(all))}
	for _, k := range harness.Kinds {
		parts = append(parts, fmt.Sprintf("%s=%d", k, c[k]))
	}
	return r.name + ": " + strings.Join(parts, " ")
}

// describe lists at most n outcomes, for failure messages.
func describe(os []outcome, n int) string {
	sort.Slice(os, func(i, j int) bool { return os[i].start.Before(os[j].start) })
	return harness.Describe(os, n)
}
