package k8s_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hapsuper/hapsuper/test/harness"
	"github.com/hapsuper/hapsuper/test/k8s/k8stest"
)

// requestTimeout bounds one client request, connection included.
const requestTimeout = 2 * time.Second

// traffic opens a new connection per request every interval from each
// node, through the Service's ClusterIP (so kube-proxy's rules choose the
// pod afresh each time), and records every outcome. A request runs in its
// own goroutine so that a slow one does not delay the next.
type traffic struct {
	cancel context.CancelFunc
	loops  sync.WaitGroup
	reqs   sync.WaitGroup

	rec harness.Record
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
					tr.reqs.Go(func() { tr.rec.Add(harness.Request(client, n.Name, url)) })
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

// where returns the outcomes for which keep holds.
func (tr *traffic) where(keep func(harness.Outcome) bool) []harness.Outcome {
	var out []harness.Outcome
	for _, o := range tr.rec.Outcomes() {
		if keep(o) {
			out = append(out, o)
		}
	}
	return out
}

// failedBefore returns the failed requests sent before cutoff (zero: all).
func (tr *traffic) failedBefore(cutoff time.Time) []harness.Outcome {
	return tr.where(func(o harness.Outcome) bool {
		return o.Kind != harness.KindOK && (cutoff.IsZero() || o.Sent.Before(cutoff))
	})
}

// answeredBy returns the requests sent at or after since that pod answered.
func (tr *traffic) answeredBy(pod string, since time.Time) []harness.Outcome {
	return tr.where(func(o harness.Outcome) bool { return o.Pod == pod && !o.Sent.Before(since) })
}

// summary counts the outcomes by kind and answering pod, per node.
func (tr *traffic) summary() string {
	counts := map[string]map[string]int{}
	for _, o := range tr.rec.Outcomes() {
		k := string(o.Kind)
		if o.Kind == harness.KindOK {
			k = o.Pod
		}
		if counts[o.Node] == nil {
			counts[o.Node] = map[string]int{}
		}
		counts[o.Node][k]++
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

// describe lists at most n outcomes, one per line.
func describe(os []harness.Outcome, n int) string {
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
