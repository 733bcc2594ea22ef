package k8s_test

import (
	"strings"
	"testing"
	"time"

	"github.com/hapsuper/hapsuper/test/harness"
	"github.com/hapsuper/hapsuper/test/k8s/k8stest"
)

// kube-apiserver and node2's kube-proxy are killed at the same time
// during the termination of web-a: hapsuper's watches break, node2's
// healthz refuses and node2's rules stay as they were. hapsuper must exit 0
// before the grace period less the margin, never claim routed-away (unless
// node2 confirmed before its kube-proxy died), name node2 in the verdict, and no request sent before the drain ended fails.
func TestDrain_APIServerAndKubeProxyGone(t *testing.T) {
	// Killed right after the delete, before the EndpointSlice controller
	// could write the slice: nothing is withdrawn anywhere, and node2 will
	// never drop web-a. The drain runs to the bound.
	t.Run("at the delete", func(t *testing.T) {
		r := drainKilledAtDelete(t, func(e *drainEnv) { killAPIServerAndKubeProxy(t, e, 2) })
		checkExitInBudget(t, r)
	})
	// Killed once hapsuper, draining, has seen the API withdraw web-a and
	// has listed the nodes to ask (it may list them at the stop request,
	// before the withdrawal, or after it): node1's
	// kube-proxy goes on and confirms, node2 refuses healthz from then on.
	// Whether node2 synced before it died decides between the bound (its
	// rules still pick web-a, the clients never go quiet) and unverified
	// naming node2 (they went quiet).
	t.Run("during the drain", func(t *testing.T) {
		e, url, a, _ := twoPods(t, k8stest.Options{Nodes: 2})
		tr := startTraffic(t, url, e.H.Nodes(), nil)
		a.terminate(t)
		if _, ok := a.Wait("routing path withdrawn in the API", nil, 10*time.Second, a.Done()); !ok {
			t.Fatalf("hapsuper of web-a did not see web-a withdrawn in the API within 10s of the delete:\n%s", a.Tail(20))
		}
		if _, ok := a.Wait("nodes listed for kube-proxy confirmation", nil, 5*time.Second, a.Done()); !ok {
			t.Fatalf("hapsuper of web-a did not list the nodes within 5s of the delete:\n%s", a.Tail(20))
		}
		killed := killAPIServerAndKubeProxy(t, e, 2)
		r := a.afterStop(t, tr, false)

		checkNoFailures(t, tr, r.Ended)
		// hapsuper polls every node as soon as it has listed them: node2
		// may have confirmed before the kill (it had synced). Then the
		// scenario did not happen and routed-away is the right verdict;
		// it is wrong only if node2 confirmed after its kube-proxy died.
		if c, ok := a.Find("kube-proxy confirmed the withdrawal", func(l harness.Entry) bool { return l.Str("node") == "node2" }); ok && c.At.Before(killed) {
			t.Logf("node2 confirmed %v before the kill: the race this scenario needs was lost; drain ended %s (%s)", killed.Sub(c.At).Round(time.Millisecond), r.Reason, r.Detail)
			checkReason(t, r, "routed-away")
			return
		}
		checkUnseen(t, r)
		checkExitInBudget(t, r)
		if !strings.Contains(r.Detail, "node2") {
			t.Errorf("drain detail %q: want node2, whose kube-proxy is gone, named", r.Detail)
		}
	})
}

// killAPIServerAndKubeProxy SIGKILLs kube-apiserver and node's
// kube-proxy, one right after the other.
func killAPIServerAndKubeProxy(t *testing.T, e *drainEnv, node int) (killed time.Time) {
	t.Helper()
	at := time.Now()
	killAPIServer(t, e)
	kp := e.H.KubeProxy(node).Process()
	if kp == nil {
		t.Fatalf("node%d has no kube-proxy process to kill", node)
	}
	if err := kp.Kill(); err != nil {
		t.Fatal(err)
	}
	t.Logf("kube-apiserver and node%d's kube-proxy killed in %v", node, time.Since(at).Round(time.Millisecond))
	return at
}

// checkExitInBudget asserts that hapsuper exited before the grace period
// less the margin.
func checkExitInBudget(t *testing.T, r drainRecord) {
	t.Helper()
	if d, limit := r.exit.Sub(r.term), drainGrace-2*time.Second; d >= limit {
		t.Errorf("hapsuper exited %v after SIGTERM: want before the grace period less the margin, %v", d, limit)
	}
}
