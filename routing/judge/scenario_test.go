package judge

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"

	"github.com/hapsuper/hapsuper/drain"
)

// The scenarios of a drain in kube-proxy mode, driven with plain values:
// the facts the observer's watches and polls would leave (paths, nodes and
// their answers), Judge at an injected now, the conditions out. The
// observer's tests (routing/confirm_test.go) run the same scenarios
// through HTTP and informers; these pin the rules alone.

// proxy is one node's kube-proxy as the scenario plays it: its syncs
// complete at the given instants of our clock, per family; its own clock
// is ours plus skew. An answer is read by the node toNode after it is sent
// and comes back fromNode later.
type proxy struct {
	n                *Node
	syncs            map[discovery.AddressType][]time.Time
	skew             time.Duration
	toNode, fromNode time.Duration
	fresh            bool // the next answer comes on a new connection
}

// cluster is web-0's drain seen from one observer: web (IPv4) withdrawn in
// the API at R, the stop requested at R, and the nodes' kube-proxies.
type cluster struct {
	t       *testing.T
	R       time.Time
	f       *Facts
	proxies map[string]*proxy
}

var web4 = PathKey{Service: "web", Family: discovery.AddressTypeIPv4}

// newCluster: every node's kube-proxy last synced 5 s before R and was
// asked once at R (the baseline at the pod's deletion), on a connection
// the later answers reuse; then web (IPv4) is withdrawn at R.
func newCluster(t *testing.T, nodes ...string) *cluster {
	c := newLateCluster(t, nodes...)
	for _, name := range nodes {
		c.answer(name, 0)
	}
	return c
}

// newLateCluster is newCluster without the baseline: the first answer of
// every node comes after the change, on a new connection.
func newLateCluster(t *testing.T, nodes ...string) *cluster {
	R := time.Date(2026, 12, 1, 10, 0, 10, 0, time.UTC)
	c := &cluster{t: t, R: R, proxies: map[string]*proxy{}, f: &Facts{
		Settings: Settings{KubeProxy: true, Namespace: "default", Node: "n1",
			Rule: Rule{MinSync: time.Second, Allowance: 250 * ms, Lag: 100 * ms}},
		Synced: true, PodSeen: true, StopAt: R,
		Paths: map[PathKey]*Path{web4: {PathVerdict: PathVerdict{Withdrawn: true, Why: "endpoint not ready, other endpoints ready"}, Since: R}},
		Nodes: map[string]*Node{},
	}}
	for i, name := range nodes {
		n := NewNode(name, fmt.Sprintf("10.0.0.%d:10256", i+1))
		c.f.Nodes[name] = n
		c.proxies[name] = &proxy{n: n, fresh: true}
		c.syncsAt(name, discovery.AddressTypeIPv4, -5*time.Second)
	}
	return c
}

// syncsAt sets a node's sync completions of one family, as offsets from R.
func (c *cluster) syncsAt(name string, fam discovery.AddressType, offsets ...time.Duration) {
	p := c.proxies[name]
	if p.syncs == nil {
		p.syncs = map[discovery.AddressType][]time.Time{}
	}
	p.syncs[fam] = nil
	for _, off := range offsets {
		p.syncs[fam] = append(p.syncs[fam], c.R.Add(off))
	}
}

// answer: the node's kube-proxy answers a request sent at R+off with its
// last sync of each family, and the answer is recorded. It returns when
// the answer came back.
func (c *cluster) answer(name string, off time.Duration) time.Time {
	p := c.proxies[name]
	sent := c.R.Add(off)
	read := sent.Add(p.toNode)
	received := read.Add(p.fromNode)
	h := Healthz{CurrentTime: read.Add(p.skew), Families: map[discovery.AddressType]FamilyHealth{}}
	for fam, syncs := range p.syncs {
		var last time.Time
		for _, s := range syncs {
			if !s.After(read) {
				last = s
			}
		}
		if !last.IsZero() {
			h.Families[fam] = FamilyHealth{LastUpdated: last.Add(p.skew), Healthy: true}
		}
	}
	p.n.Record(h, sent, received, c.f.Rule.Allowance, p.n.Answered() && !p.fresh)
	p.fresh = false
	return received
}

// fail: a request sent at R+off fails with e, seen at R+off+took; the
// next answer comes on a new connection.
func (c *cluster) fail(name string, off, took time.Duration, e *PollError) {
	p := c.proxies[name]
	p.n.Failed(e, c.R.Add(off), c.R.Add(off+took))
	p.fresh = true
}

// judge is the routing condition at now.
func (c *cluster) judge(now time.Time) drain.Routing { return Judge(c.f, now).Routing() }

// round asks the named nodes at R+off and judges once the last answer is in.
func (c *cluster) round(off time.Duration, names ...string) drain.Routing {
	now := c.R.Add(off)
	for _, name := range names {
		now = maxTime(now, c.answer(name, off))
	}
	return c.judge(now)
}

// firstWithdrawn asks the named nodes every step from R+from to R+to and
// returns the offset of the first round judged withdrawn, or -1.
func (c *cluster) firstWithdrawn(from, to, step time.Duration, names ...string) time.Duration {
	for off := from; off <= to; off += step {
		if r := c.round(off, names...); r.State == drain.RoutingWithdrawn {
			c.t.Logf("withdrawn at R+%v: %s", off, r.Detail())
			return off
		}
	}
	return -1
}

func wantAt(t *testing.T, what string, got, want time.Duration) {
	t.Helper()
	if got != want {
		t.Fatalf("%s at R+%v, want R+%v", what, got, want)
	}
}

// n1 confirms at once: its sync completed 400 ms after R, past D.
func (c *cluster) confirmN1() {
	c.t.Helper()
	c.syncsAt("n1", discovery.AddressTypeIPv4, -5*time.Second, 400*ms)
	c.answer("n1", 450*ms)
	if v, why := c.f.Rule.Node(c.f.Nodes["n1"], Targets(c.f.Paths)); v != NodeConfirmed {
		c.t.Fatalf("n1: %d (%s), want confirmed", v, why)
	}
}

// The silence rule. kube-proxy's withdrawal sync completes 30 ms after our
// receipt: within D of R, so it may be an in-flight sync that lacks the
// change. It confirms once two quick answers, D apart, the first
// MinSyncPeriod + D (1.25 s) after the sync, show no newer one: the first
// 50 ms step past R+30ms+1.25s is R+1.3s, D later R+1.55s. The node's
// clock offset changes nothing: only its ages count.
func TestScenarioSilenceRule(t *testing.T) {
	for _, skew := range []time.Duration{0, 5 * time.Second, -5 * time.Second} {
		t.Run(fmt.Sprintf("skew %v", skew), func(t *testing.T) {
			c := newCluster(t, "n1", "n2")
			c.proxies["n2"].skew = skew
			c.confirmN1()
			c.syncsAt("n2", discovery.AddressTypeIPv4, -5*time.Second, 30*ms)
			r := c.round(500*ms, "n2")
			expectRouting(t, r, drain.RoutingPending, "kube-proxy not confirmed on 1 of 2 nodes: n2: IPv4: last sync may predate the change")
			if r.PendingNodes != 1 {
				t.Errorf("PendingNodes %d, want 1", r.PendingNodes)
			}
			wantAt(t, "confirmed", c.firstWithdrawn(550*ms, 3*time.Second, 50*ms, "n2"), 1550*ms)
			expectRouting(t, c.judge(c.R.Add(1550*ms)), drain.RoutingWithdrawn, "confirmed by kube-proxy on 2 nodes")
		})
	}
}

// A first look long after the change: the first answer shows the sync
// 1.97 s old, but one answer alone may come from a kube-proxy that just
// resumed; the next, D later, confirms.
func TestScenarioLateFirstLook(t *testing.T) {
	c := newCluster(t, "n2")
	c.syncsAt("n2", discovery.AddressTypeIPv4, -5*time.Second, 30*ms)
	wantAt(t, "confirmed", c.firstWithdrawn(2*time.Second, 3*time.Second, 50*ms, "n2"), 2250*ms)
}

// A frozen node (SIGSTOP) with the withdrawal still to sync: our requests
// wait in its listen backlog and are answered the instant it resumes,
// before its sync loop runs, showing the old sync with a large age. Those
// answers are slow (400 ms, beyond quickAnswer) and must not confirm; nor
// does the stale sync right after the thaw (R+4.015s, within D of the
// stall's end). The real sync a minSyncPeriod later (R+5.015s) does, at
// the first answer past it.
func TestScenarioFrozenNode(t *testing.T) {
	c := newCluster(t, "n2")
	c.syncsAt("n2", discovery.AddressTypeIPv4, 5*ms, 4015*ms, 5015*ms)
	c.proxies["n2"].fromNode = 400 * ms
	for off := 100 * ms; off < 4*time.Second; off += 500 * ms {
		if r := c.round(off, "n2"); r.State == drain.RoutingWithdrawn {
			t.Fatalf("confirmed at R+%v from answers a frozen kube-proxy held: %s", off, r.Detail())
		}
	}
	c.proxies["n2"].fromNode = 0
	wantAt(t, "confirmed", c.firstWithdrawn(4050*ms, 7*time.Second, 50*ms, "n2"), 5050*ms)
}

// A node that accepts and does not answer (frozen) is pending and named;
// woken, its first sync may predate what it missed, and, first seen after
// a failed poll, may be a restarted kube-proxy's start stamp. Its stall
// lasts until that answer (R+1s to R+2.2s), and it may take as long again,
// at most minSyncPeriod, to read what it missed: a sync confirms by being
// late only from R+2.2s + 1s + D; the one at R+3.1s is ambiguous, the one
// at R+3.5s confirms.
func TestScenarioHungNode(t *testing.T) {
	c := newLateCluster(t, "n2")
	c.fail("n2", time.Second, time.Second, &PollError{Pending: true, Msg: "healthz at 10.0.0.1:10256 accepted but did not answer within 1s"})
	expectRouting(t, c.judge(c.R.Add(2*time.Second)), drain.RoutingPending,
		"kube-proxy not confirmed on 1 of 1 nodes: n2: ", "accepted but did not answer within 1s")
	c.syncsAt("n2", discovery.AddressTypeIPv4, 2100*ms, 3100*ms, 3500*ms)
	expectRouting(t, c.round(2200*ms, "n2"), drain.RoutingPending, "waiting for a later one")
	expectRouting(t, c.round(3200*ms, "n2"), drain.RoutingPending, "may predate the change")
	expectRouting(t, c.round(3600*ms, "n2"), drain.RoutingWithdrawn)
}

// A node whose healthz is filtered (R+0.2s to R+3.2s) while its
// kube-proxy runs and syncs the withdrawal at R+0.3s: our polls time out,
// on the kept connection, whose request is answered when the filter
// lifts; that late answer spans the stall. The sync, in the stall, may be
// a frozen kube-proxy's catch-up sync without the change, so it does not
// confirm by lateness; nor is it "no sync since the change", which would
// wait for a sync that never comes (kube-proxy has nothing more to do):
// silence proves it once the first of two quick answers D apart is read D
// past the catch-up (R+3.2s + 1s): its age must reach 4.45s − 0.3s.
func TestScenarioSyncDuringAFilteredStall(t *testing.T) {
	c := newCluster(t, "n2")
	c.syncsAt("n2", discovery.AddressTypeIPv4, -5*time.Second, 300*ms)
	expectRouting(t, c.round(100*ms, "n2"), drain.RoutingPending, "n2: IPv4: no sync since the change")
	p := c.proxies["n2"]
	for _, off := range []time.Duration{200 * ms, 1400 * ms} {
		c.fail("n2", off, time.Second, &PollError{Pending: true, Msg: "healthz at 10.0.0.1:10256 accepted but did not answer within 1s"})
		p.fresh = false // the connection is kept for the late answer
	}
	p.toNode = 3 * time.Second // the request sent at R+0.2s is read when the filter lifts
	c.answer("n2", 200*ms)
	p.toNode = 0
	expectRouting(t, c.judge(c.R.Add(3200*ms)), drain.RoutingPending, "n2: IPv4: no sync since the change")
	expectRouting(t, c.round(3400*ms, "n2"), drain.RoutingPending, "n2: IPv4: last sync may predate the change; waiting for kube-proxy to run 4.15s past it")
	wantAt(t, "confirmed", c.firstWithdrawn(3600*ms, 12*time.Second, 200*ms, "n2"), 5*time.Second)
}

// kube-proxy restarted during the drain (killed at R+0.5s, back at
// R+1.3s): its sync loop stamps lastUpdated when it starts, before its
// first sync, while the dead instance's rules still pick the pod. The
// stamp, first seen after a refused poll, must not confirm; the sync after
// it (R+1.8s) does.
func TestScenarioRestart(t *testing.T) {
	c := newCluster(t, "n1", "n2")
	c.confirmN1()
	expectRouting(t, c.round(100*ms, "n2"), drain.RoutingPending, "n2: IPv4: no sync since the change")
	c.fail("n2", 600*ms, 0, &PollError{Msg: "healthz at 10.0.0.2:10256 refused"})
	expectRouting(t, c.judge(c.R.Add(600*ms)), drain.RoutingPending, "last poll failed: healthz at 10.0.0.2:10256 refused")
	c.syncsAt("n2", discovery.AddressTypeIPv4, -5*time.Second, 1300*ms)
	for _, off := range []time.Duration{1400 * ms, 1600 * ms} {
		expectRouting(t, c.round(off, "n2"), drain.RoutingPending, "may be a restarted kube-proxy's start, not a sync")
	}
	c.syncsAt("n2", discovery.AddressTypeIPv4, -5*time.Second, 1300*ms, 1800*ms)
	expectRouting(t, c.round(1900*ms, "n2"), drain.RoutingWithdrawn, "confirmed by kube-proxy on 2 nodes")

	// A start stamp within D of the change cannot confirm by lateness, but
	// silence after it proves nothing either: the instance before it may
	// have died before it synced the change. Only a later sync confirms.
	c = newCluster(t, "n2")
	c.fail("n2", 50*ms, 0, &PollError{Msg: "healthz at 10.0.0.1:10256 refused"})
	c.syncsAt("n2", discovery.AddressTypeIPv4, -5*time.Second, 100*ms)
	for off := 200 * ms; off <= 3*time.Second; off += 250 * ms {
		expectRouting(t, c.round(off, "n2"), drain.RoutingPending, "may be a restarted kube-proxy's start, not a sync")
	}
	c.syncsAt("n2", discovery.AddressTypeIPv4, -5*time.Second, 100*ms, 3100*ms)
	expectRouting(t, c.round(3200*ms, "n2"), drain.RoutingWithdrawn)
}

// The first answer after the change: a kube-proxy restarted after the
// withdrawal and before our first poll stamped lastUpdated at its start,
// late enough to confirm, but first seen on a new connection: it must not
// confirm; its first sync, seen on that connection, does. With a baseline
// answer before the change, a lost connection (Reconnected) makes the
// same stamp wait as after any restart.
func TestScenarioFirstAnswerAfterTheChange(t *testing.T) {
	newLateCluster(t, "n2").startStampHolds("first seen on a new connection, after the change")

	c := newCluster(t, "n2")
	c.proxies["n2"].n.Reconnected() // the old instance closed the baseline's connection
	c.proxies["n2"].fresh = true
	c.startStampHolds("may be a restarted kube-proxy's start")

	// On the baseline's connection the same sync (R+400ms, past D)
	// confirms on the first answer that shows it.
	c = newCluster(t, "n2")
	c.syncsAt("n2", discovery.AddressTypeIPv4, -5*time.Second, 400*ms)
	expectRouting(t, c.round(500*ms, "n2"), drain.RoutingWithdrawn)
}

// startStampHolds: n2's new kube-proxy stamped lastUpdated at its start,
// R+400ms, past D; the answers at R+0.5s, 1.5s and 2.5s that show it leave
// the node pending, saying why; its first sync, R+2.9s, confirms.
func (c *cluster) startStampHolds(why string) {
	c.t.Helper()
	c.syncsAt("n2", discovery.AddressTypeIPv4, -5*time.Second, 400*ms)
	for _, off := range []time.Duration{500 * ms, 1500 * ms, 2500 * ms} {
		expectRouting(c.t, c.round(off, "n2"), drain.RoutingPending, why)
	}
	c.syncsAt("n2", discovery.AddressTypeIPv4, -5*time.Second, 400*ms, 2900*ms)
	expectRouting(c.t, c.round(3*time.Second, "n2"), drain.RoutingWithdrawn)
}

// Withdrawal per path: every path must be withdrawn in the API before the
// nodes are judged, and each family's change must be held by the node's
// sync of that family: web's IPv4 path withdrawn at R, its IPv6 path a
// second later; api's IPv4 path at R+100ms, which the node's IPv4 sync at
// R+400ms still holds (past D). A node's IPv6 sync before the IPv6 change
// holds nothing. A path routed here again (kube-proxy falls back to a
// serving-terminating endpoint) makes the whole verdict pending.
func TestScenarioWithdrawalPerPath(t *testing.T) {
	web6 := PathKey{Service: "web", Family: discovery.AddressTypeIPv6}
	api := PathKey{Service: "api", Family: discovery.AddressTypeIPv4}
	c := newCluster(t, "n2")
	c.f.Paths[web6] = &Path{PathVerdict: PathVerdict{Why: "endpoint ready"}}
	c.f.Paths[api] = &Path{PathVerdict: PathVerdict{Why: "serving-terminating with no other ready IPv4 endpoint: kube-proxy falls back to it"}}
	c.syncsAt("n2", discovery.AddressTypeIPv4, -5*time.Second, 400*ms)
	c.syncsAt("n2", discovery.AddressTypeIPv6, -5*time.Second, 400*ms)
	r := c.round(500*ms, "n2")
	expectRouting(t, r, drain.RoutingPending,
		"routed here in the API: default/api (IPv4): serving-terminating with no other ready IPv4 endpoint: kube-proxy falls back to it; default/web (IPv6): endpoint ready")
	if strings.Contains(r.Detail(), "web (IPv4)") {
		t.Errorf("detail names the withdrawn path among the pending ones: %s", r.Detail())
	}

	c.f.Paths[api].PathVerdict = PathVerdict{Withdrawn: true, Why: "endpoint not serving"}
	c.f.Paths[api].Since = c.R.Add(100 * ms)
	expectRouting(t, c.judge(c.R.Add(600*ms)), drain.RoutingPending, "routed here in the API: default/web (IPv6): endpoint ready")

	c.f.Paths[web6].PathVerdict = PathVerdict{Withdrawn: true, Why: "endpoint not ready, other endpoints ready"}
	c.f.Paths[web6].Since = c.R.Add(time.Second)
	if got := Targets(c.f.Paths); !got[discovery.AddressTypeIPv4].Equal(c.R.Add(100*ms)) || !got[discovery.AddressTypeIPv6].Equal(c.R.Add(time.Second)) {
		t.Fatalf("targets %v, want the latest withdrawal per family (IPv4 R+100ms, IPv6 R+1s)", got)
	}
	expectRouting(t, c.round(1100*ms, "n2"), drain.RoutingPending,
		"withdrawn in the API 100ms ago: default/api (IPv4); default/web (IPv4); default/web (IPv6)",
		"n2: IPv6: no sync since the change")
	c.syncsAt("n2", discovery.AddressTypeIPv6, -5*time.Second, 400*ms, 1400*ms)
	expectRouting(t, c.round(1500*ms, "n2"), drain.RoutingWithdrawn, "confirmed by kube-proxy on 1 nodes")

	// Routed here again: pending on that path alone, whatever the nodes held.
	c.f.Paths[api].PathVerdict = PathVerdict{Why: "serving-terminating with no other ready IPv4 endpoint: kube-proxy falls back to it"}
	c.f.Paths[api].Since = time.Time{}
	r = c.judge(c.R.Add(1600 * ms))
	expectRouting(t, r, drain.RoutingPending, "routed here in the API: default/api (IPv4)")
	if r.PendingNodes != 0 {
		t.Errorf("PendingNodes %d while the API routes here, want 0: no node is asked yet", r.PendingNodes)
	}
}

// A path kube-proxy does not carry (hostNetwork, a load balancer that
// targets pod IPs, a Service another proxy programs) is never withdrawn:
// a verdict the nodes confirmed is unverified and names it, unless the
// pod's own check follows the path.
func TestScenarioPathNotObserved(t *testing.T) {
	c := newCluster(t, "n2")
	c.syncsAt("n2", discovery.AddressTypeIPv4, -5*time.Second, 400*ms)
	lb := &corev1.Service{}
	lb.Spec.Type = corev1.ServiceTypeLoadBalancer
	lb.Annotations = map[string]string{AnnotationNLBTarget: "ip"}
	c.f.Services = map[string]*corev1.Service{"web": lb}
	c.f.Unproxied = map[string]string{"dns": "headless: clients reach the pod's address directly"}
	c.f.PodPaths = []string{"hostNetwork: the node's address reaches the pod without kube-proxy"}
	r := c.round(500*ms, "n2")
	expectRouting(t, r, drain.RoutingUnverified, "confirmed by kube-proxy on 1 nodes; not observed: hostNetwork", "default/dns: headless")
	want := Unobserved(c.f)
	if len(want) != 3 || !slices.IsSorted(want[1:]) || !strings.HasPrefix(want[0], "hostNetwork") {
		t.Errorf("not observed %q, want the pod's own path first, then the Services' sorted", want)
	}
	c.f.PodChecked = true
	r = c.judge(c.R.Add(500 * ms))
	expectRouting(t, r, drain.RoutingUnverified, "not observed: default/dns: headless")
	if strings.Contains(r.Detail(), "hostNetwork") || strings.Contains(r.Detail(), "default/web:") {
		t.Errorf("the pod's own check follows hostNetwork and the pod-IP balancer, still named: %s", r.Detail())
	}
	c.f.Unproxied = nil
	expectRouting(t, c.judge(c.R.Add(500*ms)), drain.RoutingWithdrawn)
}
