package k8s_test

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hapsuper/hapsuper/test/harness"
	"github.com/hapsuper/hapsuper/test/k8s/k8stest"
)

// The self-audit. A client on node1 holds web-a's pod IP and sends straight
// to it, as something hapsuper does not watch would (a proxy reading the
// EndpointSlices itself, a client caching the address): a new connection
// every 100 ms until 4 s after the delete, well after kube-proxy confirmed
// the withdrawal, then nothing. Those after the withdrawn verdict's
// in-flight window are late arrivals: the drain keeps serving them (each
// restarts the quiet clock), then ends unverified, counting them, with a
// WARN; nothing fails. The ClusterIP clients on both nodes never reach
// web-a after the verdict.
func TestDrain_LateArrivalsTurnUnverified(t *testing.T) {
	e, url, a, _ := twoPods(t, k8stest.Options{Nodes: 2})
	tr := startTraffic(t, url, e.H.Nodes(), nil)
	var deleted atomic.Int64
	direct := &traffic{harness.NewTraffic(func(_ string, now time.Time) bool {
		d := deleted.Load()
		if d == 0 {
			return false
		}
		return now.Sub(time.Unix(0, d)) >= 4*time.Second
	})}
	direct.Every("direct", e.H.Node(1).HTTPClient(requestTimeout), fmt.Sprintf("http://%s:8080/", a.IP), 100*time.Millisecond, true)
	t.Cleanup(direct.Stop)
	time.Sleep(300 * time.Millisecond)
	deleted.Store(time.Now().UnixNano())
	r := a.drainUnder(t, tr, true)
	direct.Stop()

	checkNoFailures(t, tr, time.Time{})
	if bad := direct.failedBefore(time.Time{}); len(bad) > 0 {
		t.Errorf("%d of the direct client's requests failed:%s", len(bad), harness.Describe(bad, 5))
	}
	checkReason(t, r, "unverified")
	// Counted from the last node's confirming sync (kube-proxy confirmed
	// the withdrawal), else from the verdict.
	if !strings.Contains(r.Detail, "new connections arrived up to") || !strings.Contains(r.Detail, "frontend web ") ||
		!strings.Contains(r.Detail, "after the last node's confirming sync") && !strings.Contains(r.Detail, "after routing was observed withdrawn") {
		t.Errorf("detail %q does not count the late arrivals on frontend web", r.Detail)
	}
	late := direct.Where(func(o harness.Outcome) bool {
		return o.Kind == harness.KindOK && !r.Withdrawn.IsZero() && o.Sent.After(r.Withdrawn)
	})
	if len(late) == 0 {
		t.Fatalf("the direct client sent nothing after routing was withdrawn (+%v): the scenario did not happen", r.Withdrawn.Sub(r.deleted))
	}
	if _, ok := a.Find("new connections after routing was observed withdrawn", nil); !ok {
		t.Error("no WARN about the late arrivals in hapsuper's log")
	}
	if n := tr.answeredBy(r.pod, r.Withdrawn); !r.Withdrawn.IsZero() && len(n) > 0 {
		t.Errorf("%d ClusterIP requests sent after the withdrawn verdict reached %s", len(n), r.pod)
	}
	t.Logf("%d direct requests after the verdict; drain ended %s +%v after the delete", len(late), r.Reason, r.Ended.Sub(r.deleted).Round(time.Millisecond))
}
