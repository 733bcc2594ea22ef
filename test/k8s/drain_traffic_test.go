package k8s_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hapsuper/hapsuper/test/k8s/k8stest"
)

// Client outcome kinds.
const (
	kindOK      = "ok"
	kindRefused = "refused"
	kindReset   = "reset"
	kindTimeout = "timeout"
	kind5xx     = "5xx"
	kindOther   = "other"
)

// requestTimeout bounds one client request, connection included.
const requestTimeout = 2 * time.Second

// outcome is one request through the ClusterIP, on a new connection.
type outcome struct {
	node       string
	sent, done time.Time
	pod        string // the body: the answering pod's name
	kind       string
	err        string
}

func (o outcome) String() string {
	s := fmt.Sprintf("%s %s %s", o.sent.Format("15:04:05.000"), o.node, o.kind)
	if o.pod != "" {
		s += " " + o.pod
	}
	if o.err != "" {
		s += " (" + o.err + ")"
	}
	return s
}

// traffic opens a new connection per request every interval from each
// node, through the Service's ClusterIP (so kube-proxy's rules choose the
// pod afresh each time), and records every outcome. A request runs in its
// own goroutine so that a slow one does not delay the next.
type traffic struct {
	cancel context.CancelFunc
	loops  sync.WaitGroup
	reqs   sync.WaitGroup

	mu  sync.Mutex
	out []outcome
}

// pauseFunc says whether node's client holds back a request at now.
type pauseFunc func(node string, now time.Time) bool

// startTraffic starts the clients; stop ends them. pause may be nil.
func startTraffic(t *testing.T, url string, nodes []*k8stest.Node, interval time.Duration, pause pauseFunc) *traffic {
	ctx, cancel := context.WithCancel(context.Background())
	tr := &traffic{cancel: cancel}
	for _, n := range nodes {
		client := n.HTTPClient(requestTimeout)
		tr.loops.Go(func() {
			tick := time.NewTicker(interval)
			defer tick.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case now := <-tick.C:
					if pause != nil && pause(n.Name, now) {
						continue
					}
					tr.reqs.Go(func() { tr.add(request(client, n.Name, url)) })
				}
			}
		})
	}
	t.Cleanup(tr.stop)
	return tr
}

// stop ends the clients and waits for the requests in flight (each bounded
// by requestTimeout).
func (tr *traffic) stop() {
	tr.cancel()
	tr.loops.Wait()
	tr.reqs.Wait()
}

func (tr *traffic) add(o outcome) {
	tr.mu.Lock()
	tr.out = append(tr.out, o)
	tr.mu.Unlock()
}

// outcomes returns the outcomes so far, by send time.
func (tr *traffic) outcomes() []outcome {
	tr.mu.Lock()
	out := append([]outcome(nil), tr.out...)
	tr.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].sent.Before(out[j].sent) })
	return out
}

// where returns the outcomes for which keep holds.
func (tr *traffic) where(keep func(outcome) bool) []outcome {
	var out []outcome
	for _, o := range tr.outcomes() {
		if keep(o) {
			out = append(out, o)
		}
	}
	return out
}

// failedBefore returns the failed requests sent before cutoff (zero: all).
func (tr *traffic) failedBefore(cutoff time.Time) []outcome {
	return tr.where(func(o outcome) bool {
		return o.kind != kindOK && (cutoff.IsZero() || o.sent.Before(cutoff))
	})
}

// answeredBy returns the requests sent at or after since that pod answered.
func (tr *traffic) answeredBy(pod string, since time.Time) []outcome {
	return tr.where(func(o outcome) bool { return o.pod == pod && !o.sent.Before(since) })
}

// summary counts the outcomes by kind and answering pod, per node.
func (tr *traffic) summary() string {
	counts := map[string]map[string]int{}
	for _, o := range tr.outcomes() {
		k := o.kind
		if o.kind == kindOK {
			k = o.pod
		}
		if counts[o.node] == nil {
			counts[o.node] = map[string]int{}
		}
		counts[o.node][k]++
	}
	var nodes []string
	for n := range counts {
		nodes = append(nodes, n)
	}
	sort.Strings(nodes)
	var b strings.Builder
	for _, n := range nodes {
		fmt.Fprintf(&b, "%s %v; ", n, counts[n])
	}
	return strings.TrimSuffix(b.String(), "; ")
}

// request makes one GET and classifies what happened.
func request(client *http.Client, node, url string) outcome {
	o := outcome{node: node, sent: time.Now()}
	resp, err := client.Get(url)
	if err != nil {
		o.kind, o.err, o.done = classifyErr(err), err.Error(), time.Now()
		return o
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1024))
	resp.Body.Close()
	o.done = time.Now()
	switch {
	case err != nil:
		o.kind, o.err = classifyErr(err), err.Error()
	case resp.StatusCode >= 500:
		o.kind, o.err = kind5xx, resp.Status
	case resp.StatusCode != http.StatusOK:
		o.kind, o.err = kindOther, resp.Status
	default:
		o.kind, o.pod = kindOK, string(body)
	}
	return o
}

func classifyErr(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return kindRefused
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return kindReset
	case errors.As(err, &ne) && ne.Timeout():
		return kindTimeout
	}
	return kindOther
}

// describe lists at most n outcomes, one per line.
func describe(os []outcome, n int) string {
	var b strings.Builder
	for i, o := range os {
		if i == n {
			fmt.Fprintf(&b, "\n  … and %d more", len(os)-n)
			break
		}
		b.WriteString("\n  " + o.String())
	}
	return b.String()
}
