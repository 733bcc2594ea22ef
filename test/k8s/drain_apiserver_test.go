package k8s_test

import (
	"net/netip"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hapsuper/hapsuper/test/k8s/k8stest"
)

// kube-apiserver is killed during the termination of web-a. hapsuper must
// not crash or hang on its broken watches, must exit 0 before the grace
// period, must never claim routed-away from what it could not see, and no
// request sent before the drain ended fails.
func TestDrain_APIServerKilled(t *testing.T) {
	// Killed right after the delete, before the EndpointSlice controller
	// could write the slice (or just after): nothing is withdrawn anywhere,
	// the drain runs to the bound.
	t.Run("before the slice update", func(t *testing.T) {
		drainKilledAtDelete(t, func(e *drainEnv) { killAPIServer(t, e) })
	})
	// Killed once hapsuper's watch saw the slice withdraw web-a, before the
	// SIGTERM: the kube-proxies have the change; if hapsuper could not list
	// the nodes to ask them, the quiet period decides: unverified. (It lists
	// them when its watch sees the deletion, usually before the kill: then
	// the nodes it asked confirm.)
	t.Run("after the slice update", func(t *testing.T) {
		e, url, a, _ := twoPods(t, k8stest.Options{Nodes: 2})
		tr := startTraffic(t, url, e.H.Nodes(), nil)
		a.deleteOnly(t)
		if _, ok := a.Wait("routing path withdrawn in the API", nil, 5*time.Second, a.Done()); !ok {
			t.Fatalf("hapsuper did not see web-a withdrawn in the API within 5s of the delete:\n%s", a.Tail(20))
		}
		// The premise is that the kube-proxies have the change: wait until
		// no node's rules hold web-a (a kube-proxy's watch can lag ours by
		// seconds on a loaded machine; killed earlier, node1 kept routing to
		// web-a and the drain rightly ran to the bound).
		waitRulesWithout(t, e.H.Nodes(), a.IP, 10*time.Second)
		killed := time.Now()
		killAPIServer(t, e)
		a.sigterm(t)
		r := a.afterStop(t, tr, false)

		checkNoFailures(t, tr, time.Time{})
		// hapsuper lists the nodes and asks them once as soon as its watch
		// sees the pod's deletion: when that came before the kill, the
		// kube-proxies it had reached confirm (they had the change), and
		// routed-away is right; the scenario needs the list to fail.
		if l, ok := a.Find("nodes listed for kube-proxy confirmation", nil); ok && l.At.Before(killed) {
			t.Logf("the nodes were listed %v before the kill: drain ended %s (%s)", killed.Sub(l.At).Round(time.Millisecond), r.Reason, r.Detail)
			checkReason(t, r, "routed-away")
			if !strings.Contains(r.Detail, "confirmed by kube-proxy on 2 nodes") {
				t.Errorf("drain detail %q: want both nodes' kube-proxies confirming", r.Detail)
			}
			return
		}
		checkReason(t, r, "unverified")
		if !strings.Contains(r.Detail, "list nodes") {
			t.Errorf("drain detail %q: want it to say the nodes could not be listed", r.Detail)
		}
		if !r.Withdrawn.IsZero() {
			t.Errorf("hapsuper logged routing withdrawn at +%v without any kube-proxy confirmation", r.Withdrawn.Sub(r.deleted))
		}
	})
}

// waitRulesWithout waits (bounded) until no node's kube-proxy nftables table
// holds ip.
func waitRulesWithout(t *testing.T, nodes []*k8stest.Node, ip netip.Addr, bound time.Duration) {
	t.Helper()
	// An address in a rule is followed by a space, "/" or "," (sets, chain
	// names), never by a digit: 10.251.16.2 must not match 10.251.16.20.
	re := regexp.MustCompile(regexp.QuoteMeta(ip.String()) + `([^0-9]|$)`)
	began := time.Now()
	for _, n := range nodes {
		for {
			out, err := exec.Command("ip", "netns", "exec", n.NetNS, "nft", "list", "table", "ip", "kube-proxy").CombinedOutput()
			if err != nil {
				t.Fatalf("list node %s's kube-proxy rules: %v: %s", n.Name, err, out)
			}
			if !re.Match(out) {
				break
			}
			if time.Since(began) > bound {
				t.Fatalf("node %s's kube-proxy still routes to %s %v after the delete", n.Name, ip, bound)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	t.Logf("no node's rules hold %s, %v after hapsuper saw the withdrawal", ip, time.Since(began).Round(time.Millisecond))
}

// drainKilledAtDelete deletes web-a under traffic, runs kill right after
// the delete, sends the SIGTERM, and checks the drain as checkUnseen does
// and that no request sent before it ended failed.
func drainKilledAtDelete(t *testing.T, kill func(*drainEnv)) drainRecord {
	t.Helper()
	e, url, a, _ := twoPods(t, k8stest.Options{Nodes: 2})
	tr := startTraffic(t, url, e.H.Nodes(), nil)
	a.deleteOnly(t)
	kill(e)
	a.sigterm(t)
	r := a.afterStop(t, tr, false)
	checkNoFailuresBeforeBound(t, tr, r) // it ends at the bound, or unverified, while still routed
	checkUnseen(t, r)
	return r
}

// checkUnseen asserts what a drain that could not see routing withdrawn
// may end with: the bound or unverified, and never a withdrawal.
func checkUnseen(t *testing.T, r drainRecord) {
	t.Helper()
	if r.Reason != "bound" && r.Reason != "unverified" {
		t.Errorf("drain ended %q (%s): want bound or unverified", r.Reason, r.Detail)
	}
	if !r.Withdrawn.IsZero() {
		t.Errorf("hapsuper logged routing withdrawn at +%v with the apiserver gone", r.Withdrawn.Sub(r.deleted))
	}
}

func killAPIServer(t *testing.T, e *drainEnv) {
	t.Helper()
	at := time.Now()
	if err := e.H.APIServerProcess().Kill(); err != nil {
		t.Fatal(err)
	}
	t.Logf("kube-apiserver killed in %v", time.Since(at).Round(time.Millisecond))
}
