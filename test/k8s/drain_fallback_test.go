package k8s_test

import (
	"cmp"
	"strings"
	"testing"
	"time"

	"github.com/hapsuper/hapsuper/test/harness"
	"github.com/hapsuper/hapsuper/test/k8s/k8stest"
)

// The Service's only pod terminates: kube-proxy falls back to its
// serving-terminating endpoint, so routing stays pending, the drain holds
// the listeners open until the bound, and nothing sent during the drain is
// refused.
func TestDrain_LastReadyPod(t *testing.T) {
	e := newDrainEnv(t, k8stest.Options{Nodes: 2})
	url := e.service(t, "web", false)
	a := e.startPod(t, 1, "web-a", "web")
	a.ready(t)
	e.waitRouted(t, url, map[int][]string{1: {"web-a"}, 2: {"web-a"}})
	tr := startTraffic(t, url, e.H.Nodes(), nil)
	r := a.drainUnder(t, tr, true)

	checkNoFailuresBeforeBound(t, tr, r)
	checkBound(t, r, tr, "")
}

// checkNoFailuresBeforeBound is checkNoFailures for a drain that ended at
// its bound while kube-proxy still routed to the pod: the bound
// soft-stops a pod that still gets connections, so a request sent in the
// last moments before the "drain ended" line (its SYN behind the SIGUSR1
// that follows the line) is refused by design. Those are logged; any
// earlier failure fails the test.
func checkNoFailuresBeforeBound(t *testing.T, tr *traffic, r drainRecord) {
	t.Helper()
	checkNoFailures(t, tr, r.Ended.Add(-boundInFlight))
	if late := len(tr.failedBefore(r.Ended)) - len(tr.failedBefore(r.Ended.Add(-boundInFlight))); late > 0 {
		t.Logf("%s: %d request(s) sent within %v before the bound's soft stop refused", r.pod, late, boundInFlight)
	}
}

// boundInFlight is how long before a bound's soft stop a request may be
// sent and still meet the closed listener: seen 1 ms before the line on
// an idle machine, 16 ms on one loaded by parallel test runs (its dial
// waited that long for the CPU).
const boundInFlight = 100 * time.Millisecond

// internalTrafficPolicy Local: each node routes only to its own pods, and
// falls back, per node, to its own serving-terminating ones.
func TestDrain_InternalTrafficPolicyLocal(t *testing.T) {
	// Another ready pod on web-a's node: node1 routes there at once.
	t.Run("other pod on the node", func(t *testing.T) {
		e := newDrainEnv(t, k8stest.Options{Nodes: 2})
		url := e.service(t, "web", true)
		a := e.startPod(t, 1, "web-a", "web")
		a.ready(t)
		e.startPlainPod(t, 1, "web-a2", "web")
		e.startPlainPod(t, 2, "web-b", "web")
		e.waitRouted(t, url, map[int][]string{1: {"web-a", "web-a2"}, 2: {"web-b"}})
		tr := startTraffic(t, url, e.H.Nodes(), nil)
		r := a.drainUnder(t, tr, true)

		checkNoFailures(t, tr, time.Time{})
		checkReason(t, r, "routed-away")
		checkNoDNATAfterWithdrawn(t, tr, r)
		if n := tr.Where(func(o harness.Outcome) bool { return o.Node == "node2" && o.Pod != "web-b" }); len(n) > 0 {
			t.Errorf("node2 reached pods other than its own (internalTrafficPolicy Local):%s", harness.Describe(n, 5))
		}
	})
	// The only other ready pod is on node2: node1 keeps routing to
	// web-a (its serving-terminating endpoint) until the bound.
	t.Run("other pod on the other node only", func(t *testing.T) {
		e := newDrainEnv(t, k8stest.Options{Nodes: 2})
		url := e.service(t, "web", true)
		a := e.startPod(t, 1, "web-a", "web")
		a.ready(t)
		e.startPlainPod(t, 2, "web-b", "web")
		e.waitRouted(t, url, map[int][]string{1: {"web-a"}, 2: {"web-b"}})
		tr := startTraffic(t, url, e.H.Nodes(), nil)
		r := a.drainUnder(t, tr, true)

		checkNoFailuresBeforeBound(t, tr, r)
		checkBound(t, r, tr, "node1")
		if !strings.Contains(r.Detail, "node") {
			t.Logf("detail does not name the node: %q", r.Detail)
		}
	})
}

// checkBound asserts a drain that ran to the bound with routing pending in
// the API and never withdrawn, while tr's clients (on node; "": any) still
// reached the pod in its second half: kube-proxy's fallback to the pod's
// serving-terminating endpoint was exercised.
func checkBound(t *testing.T, r drainRecord, tr *traffic, node string) {
	t.Helper()
	checkReason(t, r, "bound")
	if !r.Withdrawn.IsZero() {
		t.Errorf("%s: hapsuper logged routing withdrawn at +%v although kube-proxy still routes to it", r.pod, r.Withdrawn.Sub(r.deleted))
	}
	if !strings.Contains(r.Detail, "routed here in the API") {
		t.Errorf("%s: drain detail %q: want routing pending in the API", r.pod, r.Detail)
	}
	if d := r.Ended.Sub(r.term); d < drainBound-200*time.Millisecond || d > drainBound+time.Second {
		t.Errorf("%s: drain ended %v after SIGTERM: want the bound, %v", r.pod, d, drainBound)
	}
	served := tr.Where(func(o harness.Outcome) bool {
		return (node == "" || o.Node == node) && o.Pod == r.pod && o.Sent.After(r.term.Add(drainBound/2))
	})
	if len(served) == 0 {
		t.Errorf("%s: no request sent in the second half of its drain (clients on %s) reached it: the fallback was not exercised", r.pod, cmp.Or(node, "every node"))
	}
}
