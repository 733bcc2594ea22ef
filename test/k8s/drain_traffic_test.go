package k8s_test

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hapsuper/hapsuper/test/harness"
	"github.com/hapsuper/hapsuper/test/k8s/k8stest"
)

// requestTimeout bounds one client request, connection included.
const requestTimeout = 2 * time.Second

// traffic is the scenarios' clients: startTraffic's open a new connection
// per request every interval from each node, through the Service's
// ClusterIP (so kube-proxy's rules choose the pod afresh each time).
type traffic struct {
	*harness.Traffic
}

// pauseFunc says whether node's client holds back a request at now.
type pauseFunc func(node string, now time.Time) bool

// startTraffic starts a client every 20 ms on every node (pause may be nil)
// and lets them run 500 ms before the scenario acts.
func startTraffic(t *testing.T, url string, nodes []*k8stest.Node, pause pauseFunc) *traffic {
	tr := &traffic{harness.NewTraffic(pause)}
	for _, n := range nodes {
		tr.Every(n.Name, n.HTTPClient(requestTimeout), url, 20*time.Millisecond, true)
	}
	t.Cleanup(tr.Stop)
	time.Sleep(500 * time.Millisecond)
	return tr
}

// failedBefore returns the failed requests sent before cutoff (zero: all).
func (tr *traffic) failedBefore(cutoff time.Time) []harness.Outcome {
	return tr.Where(func(o harness.Outcome) bool {
		return o.Kind != harness.KindOK && (cutoff.IsZero() || o.Sent.Before(cutoff))
	})
}

// answeredBy returns the requests sent at or after since that pod answered.
func (tr *traffic) answeredBy(pod string, since time.Time) []harness.Outcome {
	return tr.Where(func(o harness.Outcome) bool { return o.Pod == pod && !o.Sent.Before(since) })
}

// summary counts the outcomes by kind and answering pod, per node.
func (tr *traffic) summary() string {
	counts := map[string]map[string]int{}
	for _, o := range tr.Outcomes() {
		k := string(o.Kind)
		if o.Kind == harness.KindOK {
			k = o.Pod
		}
		if counts[o.Node] == nil {
			counts[o.Node] = map[string]int{}
		}
		counts[o.Node][k]++
	}
	var parts []string
	for _, n := range slices.Sorted(maps.Keys(counts)) {
		parts = append(parts, fmt.Sprintf("%s %v", n, counts[n]))
	}
	return strings.Join(parts, "; ")
}
