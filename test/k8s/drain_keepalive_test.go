package k8s_test

import (
	"strings"
	"testing"
	"time"

	"github.com/hapsuper/hapsuper/test/harness"
	"github.com/hapsuper/hapsuper/test/k8s/k8stest"
)

// startPooled starts, on every node, the clients real ingress traffic is
// made of, all through the ClusterIP: two HTTP/1.1 connection pools of one
// kept-alive connection each and two h2c clients, each sending a request
// every interval; and one pool that sends a request every idle (longer than
// the quiet period) and keeps its connection idle in between.
func startPooled(t *testing.T, url string, nodes []*k8stest.Node, interval, idle time.Duration) *traffic {
	tr := &traffic{harness.NewTraffic(nil)}
	for _, n := range nodes {
		for range 2 {
			tr.Every(n.Name, harness.KeepAliveClient(n.DialContext, requestTimeout), url, interval, false)
			tr.Every(n.Name, harness.H2CClient(n.DialContext, requestTimeout), url, interval, false)
		}
		tr.Every(n.Name, harness.KeepAliveClient(n.DialContext, requestTimeout), url, idle, false)
	}
	t.Cleanup(tr.Stop)
	return tr
}

// idleBound is what ends an idle kept-alive connection after the soft stop
// in haproxyCfg: timeout http-request (no http-keep-alive is set).
const idleBound = 5 * time.Second

// Kept-alive HTTP/1.1 pools and h2c clients on both nodes through the
// ClusterIP never pause, yet the drain of pod A ends routed-away within the
// quiet period of the withdrawn verdict: once kube-proxy no longer picks A,
// requests on its old connections are no routing signal, and the soft stop
// ends those connections cleanly (Connection: close, GOAWAY). No request
// fails; the clients' later requests are answered by B; an idle pooled
// connection holds HAProxy no longer than the configuration's idle timeout.
func TestDrain_KeptAliveRoutedAway(t *testing.T) {
	e, url, a, b := twoPods(t, k8stest.Options{Nodes: 2, ProxyMode: "nftables"})
	tr := startPooled(t, url, e.H.Nodes(), 50*time.Millisecond, 2*drainQuiet+500*time.Millisecond)
	time.Sleep(time.Second)
	onA := tr.Where(func(o harness.Outcome) bool { return o.Pod == "web-a" })
	if len(onA) == 0 {
		t.Fatalf("no client connection landed on web-a before the delete: %s", tr.summary())
	}
	r := a.drainUnder(t, tr, true)
	checkNoFailures(t, tr, time.Time{})
	checkReason(t, r, "routed-away")
	if r.Withdrawn.IsZero() {
		t.Fatal("hapsuper never logged routing state=withdrawn")
	}
	soft := r.Soft.Sub(r.Withdrawn)
	t.Logf("withdrawn → soft stop %v (quiet period %v); soft stop → HAProxy exit %v (idle bound %v); %d requests answered by web-a before the delete",
		soft.Round(time.Millisecond), drainQuiet, r.HAProxyExit.Sub(r.Soft).Round(time.Millisecond), idleBound, len(onA))
	// Both instants are hapsuper's; the quiet is proved by a poll, which a
	// loaded machine delays: a second tells a drain that waited for the
	// quiet from one that waited for something else (the bound).
	if soft > drainQuiet+time.Second {
		t.Errorf("soft stop %v after routing was withdrawn: want within the quiet period %v (+1 s)", soft, drainQuiet)
	}
	if d := r.HAProxyExit.Sub(r.Soft); d > idleBound+time.Second {
		t.Errorf("HAProxy exited %v after the soft stop: idle connections held it past the idle bound %v", d, idleBound)
	}
	for _, n := range e.H.Nodes() {
		later := tr.Where(func(o harness.Outcome) bool {
			return o.Node == n.Name && o.Kind == harness.KindOK && o.Pod == "web-b" && o.Sent.After(r.Soft)
		})
		if len(later) == 0 {
			t.Errorf("node %s: no request after the soft stop answered by web-b", n.Name)
		}
	}
	b.terminate(t)
	b.waitExit(t, drainGrace+2*time.Second)
}

// haproxyCfgNoIdleClose is haproxyCfg without option idle-close-on-response:
// the soft stop cuts idle kept-alive connections, so their requests keep
// counting once routing is withdrawn.
var haproxyCfgNoIdleClose = strings.Replace(haproxyCfg, "    option idle-close-on-response\n", "", 1)

// The same kept-alive clients against a frontend whose soft stop is not
// graceful: its requests keep counting after the withdrawal, the drain runs
// to the bound, and both the start warning and the drain's detail name the
// frontend and the option it lacks.
func TestDrain_KeptAliveUngracefulFrontendNamed(t *testing.T) {
	if haproxyCfgNoIdleClose == haproxyCfg {
		t.Fatal("haproxyCfg no longer sets option idle-close-on-response: update this test")
	}
	e, url, a, _ := twoPods(t, k8stest.Options{Nodes: 2, ProxyMode: "nftables"}, podOptions{cfg: haproxyCfgNoIdleClose})
	warned := false
	var warnings []string
	for _, l := range a.All("config warning") {
		w := l.Str("warning")
		warnings = append(warnings, w)
		warned = warned || strings.Contains(w, "frontend web") && strings.Contains(w, "idle-close-on-response")
	}
	if !warned {
		t.Errorf("no config warning naming frontend web and idle-close-on-response; config warnings: %q", warnings)
	}

	tr := startPooled(t, url, e.H.Nodes(), 50*time.Millisecond, 2*drainQuiet+500*time.Millisecond)
	time.Sleep(time.Second)
	a.terminate(t)
	a.waitExit(t, drainGrace+2*time.Second)
	a.finish(t)
	tr.Stop()
	r := a.record(t)
	t.Logf("%v", r)
	checkReason(t, r, "bound")
	if !strings.Contains(r.Detail, "request on web (no option idle-close-on-response") {
		t.Errorf("drain detail %q does not name frontend web and the option it lacks", r.Detail)
	}
	if r.Withdrawn.IsZero() || !r.Withdrawn.Before(r.Soft) {
		t.Errorf("routing withdrawn at %v, soft stop at %v: want withdrawn first (the bound, not routing, held the drain)", r.Withdrawn, r.Soft)
	}
}
