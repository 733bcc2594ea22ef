package k8s_test

import (
	"testing"
	"time"

	"github.com/hapsuper/hapsuper/test/harness"
	"github.com/hapsuper/hapsuper/test/k8s/k8stest"
)

// Two ready pods, one per node, clients on both nodes opening a connection
// every 20 ms through the ClusterIP. Deleting pod A (delete, then SIGTERM
// as the kubelet does) fails no request; A's drain ends routed-away; and no
// request sent after hapsuper first logged routing state=withdrawn reached
// A: no node DNATed a new connection to A after hapsuper's confirmation.
// In both kube-proxy modes.
func TestDrain_RoutedAway(t *testing.T) {
	for _, mode := range []string{"nftables", "iptables"} {
		t.Run(mode, func(t *testing.T) {
			e, url, a, _ := twoPods(t, k8stest.Options{Nodes: 2, ProxyMode: mode})
			tr := startTraffic(t, url, e.H.Nodes(), nil)
			r := a.drainUnder(t, tr, true)
			checkNoFailures(t, tr, time.Time{})
			checkReason(t, r, "routed-away")
			checkNoDNATAfterWithdrawn(t, tr, r)
			if note, ok := e.drainEvent(t, "web-a"); ok {
				t.Logf("Event DrainEnded on web-a: %s", note)
			} else {
				t.Errorf("no Event DrainEnded on web-a; hapsuper's warnings: %v", a.Warnings())
			}
		})
	}
}

// checkNoFailures asserts that no request sent before cutoff (zero: any)
// failed.
func checkNoFailures(t *testing.T, tr *traffic, cutoff time.Time) {
	t.Helper()
	if bad := tr.failedBefore(cutoff); len(bad) > 0 {
		t.Errorf("%d failed requests:%s", len(bad), harness.Describe(bad, 10))
	}
}

// checkReason asserts how the drain ended.
func checkReason(t *testing.T, r drainRecord, want string) {
	t.Helper()
	if r.Reason != want {
		t.Errorf("%s: drain ended %q (%s), want %q", r.pod, r.Reason, r.Detail, want)
	}
}

// checkNoDNATAfterWithdrawn asserts that the drain logged routing
// withdrawn, and that no request sent from then on reached the pod.
func checkNoDNATAfterWithdrawn(t *testing.T, tr *traffic, r drainRecord) {
	t.Helper()
	if r.Withdrawn.IsZero() {
		t.Errorf("%s: hapsuper never logged routing state=withdrawn", r.pod)
		return
	}
	late := tr.answeredBy(r.pod, r.Withdrawn)
	last := tr.Where(func(o harness.Outcome) bool { return o.Pod == r.pod })
	if len(last) > 0 {
		t.Logf("%s: last request it answered was sent %v before its withdrawn log line",
			r.pod, r.Withdrawn.Sub(last[len(last)-1].Sent).Round(time.Millisecond))
	}
	if len(late) > 0 {
		t.Errorf("%s: %d requests sent after its routing withdrawn log line (%s) reached it:%s",
			r.pod, len(late), r.Withdrawn.Format("15:04:05.000"), harness.Describe(late, 10))
	}
}
