package judge

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"

	"github.com/hapsuper/hapsuper/drain"
)

func expectRouting(t *testing.T, got drain.Routing, state drain.RoutingState, want ...string) {
	t.Helper()
	if got.State != state {
		t.Errorf("state %s, want %s (%s)", got.State, state, got.Detail())
	}
	for _, w := range want {
		if !strings.Contains(got.Detail(), w) {
			t.Errorf("detail %q does not say %q", got.Detail(), w)
		}
	}
}

// withdrawnFacts: web (IPv4) withdrawn at t0 in the API, its node's external
// traffic still coming here through a balancer that checks port 32000.
func withdrawnFacts(t0 time.Time) *Facts {
	return &Facts{
		Settings: Settings{Namespace: "default", Node: "n1", LBHealthCheckWindow: 6 * time.Second},
		Synced:   true, PodSeen: true, StopAt: t0,
		HostIP: netip.MustParseAddr("10.0.0.1"),
		Paths: map[PathKey]*Path{{Service: "web", Family: discovery.AddressTypeIPv4}: {
			PathVerdict: PathVerdict{Withdrawn: true, Why: "endpoint not ready", Balancer: &BalancerPath{Port: 32000}},
			Since:       t0,
		}},
		Services:     map[string]*corev1.Service{},
		LBNodeChecks: map[CheckKey]*CheckState{},
	}
}

// The balancer that checks the node holds the verdict until its window has
// passed since the check was seen failing; then withdrawn says Balancer.
func TestJudgeNodeBalancerWindow(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	f := withdrawnFacts(t0)
	r := Judge(f, t0.Add(time.Second)).Routing()
	expectRouting(t, r, drain.RoutingPending, "(kube-proxy not observed)", "health check http://10.0.0.1:32000/ not asked yet")
	ck := CheckKey{Addr: f.HostIP, Port: 32000}
	st := &CheckState{}
	f.LBNodeChecks[ck] = st
	if began, _ := st.Saw(true, "HTTP 503, localEndpoints 0", t0.Add(2*time.Second)); !began {
		t.Error("the first failing answer begins the run")
	}
	r = Judge(f, t0.Add(5*time.Second)).Routing()
	expectRouting(t, r, drain.RoutingPending, "failing for 3.0s", "within 6s (--lb-health-check-window): 3s more")
	r = Judge(f, t0.Add(8*time.Second)).Routing()
	expectRouting(t, r, drain.RoutingWithdrawn, "external path via node n1 withdrawn by the load balancer", "window 6s (--lb-health-check-window) passed")
	if !r.Balancer || !r.APIOnly {
		t.Errorf("Balancer %v APIOnly %v, want both", r.Balancer, r.APIOnly)
	}
	// A 200 starts the run again.
	st.Saw(false, "HTTP 200, localEndpoints 1", t0.Add(9*time.Second))
	expectRouting(t, Judge(f, t0.Add(10*time.Second)).Routing(), drain.RoutingPending, "not failing (HTTP 200, localEndpoints 1)")
}

// In kube-proxy mode the nodes decide after the API: pending nodes are
// counted, and a node that left the set is named.
func TestJudgeKubeProxyNodes(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	f := withdrawnFacts(t0)
	f.Paths[PathKey{Service: "web", Family: discovery.AddressTypeIPv4}].Balancer = nil
	f.KubeProxy = true
	f.Rule = Rule{MinSync: time.Second, Allowance: 250 * time.Millisecond, Lag: 100 * time.Millisecond}
	expectRouting(t, Judge(f, t0).Routing(), drain.RoutingPending, "nodes not listed yet")
	f.Nodes = map[string]*Node{"n1": NewNode("n1", "10.0.0.1:10256"), "n2": NewNode("n2", "")}
	f.LeftNodes = map[string]string{"n3": "deleted"}
	r := Judge(f, t0).Routing()
	expectRouting(t, r, drain.RoutingPending, "1 nodes left the set: n3 deleted", "kube-proxy not confirmed on 1 of 2 nodes: n1: healthz not read yet")
	if r.PendingNodes != 1 {
		t.Errorf("PendingNodes %d, want 1", r.PendingNodes)
	}
	// A baseline answer before the change, then a sync after it on the
	// same connection.
	h := Healthz{CurrentTime: t0.Add(-time.Second), Families: map[discovery.AddressType]FamilyHealth{
		discovery.AddressTypeIPv4: {LastUpdated: t0.Add(-5 * time.Second), Healthy: true}}}
	f.Nodes["n1"].Record(h, t0.Add(-time.Second), t0.Add(-time.Second), f.Rule.Allowance, false)
	h = Healthz{CurrentTime: t0.Add(time.Second), Families: map[discovery.AddressType]FamilyHealth{
		discovery.AddressTypeIPv4: {LastUpdated: t0.Add(500 * time.Millisecond), Healthy: true}}}
	f.Nodes["n1"].Record(h, t0.Add(time.Second), t0.Add(time.Second), f.Rule.Allowance, true)
	expectRouting(t, Judge(f, t0).Routing(), drain.RoutingUnverified, "kube-proxy not observed on 1 of 2 nodes: n2: node has no InternalIP", "confirmed on the others")
}

// Paths kube-proxy does not carry make a withdrawn verdict unverified, and
// the load balancer delay holds it pending first.
func TestJudgeUnobservedAndHold(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	f := withdrawnFacts(t0)
	f.Paths[PathKey{Service: "web", Family: discovery.AddressTypeIPv4}].Balancer = nil
	f.PodPaths = []string{"hostNetwork: the node's address reaches the pod without kube-proxy"}
	f.LoadBalancerDelay = 30 * time.Second
	expectRouting(t, Judge(f, t0.Add(10*time.Second)).Routing(), drain.RoutingPending, "not observed: hostNetwork", "holding 20s more")
	r := Judge(f, t0.Add(31*time.Second)).Routing()
	expectRouting(t, r, drain.RoutingUnverified, "withdrawn in the API 31s ago: default/web (IPv4) (kube-proxy not observed); not observed: hostNetwork")
	if r.APIOnly {
		t.Error("an unverified verdict is not APIOnly")
	}
	f.PodChecked = true // the pod's own check follows that path
	expectRouting(t, Judge(f, t0.Add(31*time.Second)).Routing(), drain.RoutingWithdrawn)
	f.Synced, f.WatchErr = false, "forbidden"
	expectRouting(t, Judge(f, t0).Routing(), drain.RoutingUnverified, "watch not synced: forbidden")
}

// Once every node confirmed, the routing condition is Confirmed and dated
// by the last node's confirming sync; a load balancer delay beside it
// leaves it undated (the delay, not kube-proxy, ends it), and the API alone
// never confirms.
func TestJudgeConfirmedSyncedBy(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	f := withdrawnFacts(t0)
	f.Paths[PathKey{Service: "web", Family: discovery.AddressTypeIPv4}].Balancer = nil
	if r := Judge(f, t0.Add(time.Second)).Routing(); r.State != drain.RoutingWithdrawn || r.Confirmed {
		t.Fatalf("endpointslices mode: %s confirmed %v, want withdrawn, not confirmed", r.State, r.Confirmed)
	}
	f.KubeProxy = true
	f.Rule = Rule{MinSync: time.Second, Allowance: 250 * time.Millisecond, Lag: 100 * time.Millisecond}
	f.Nodes = map[string]*Node{"n1": NewNode("n1", "10.0.0.1:10256"), "n2": NewNode("n2", "10.0.0.2:10256")}
	sync := func(n string, at, lastUpdated time.Duration) { // an answer received at `at`, its age exact
		h := Healthz{CurrentTime: t0.Add(at), Families: map[discovery.AddressType]FamilyHealth{
			discovery.AddressTypeIPv4: {LastUpdated: t0.Add(lastUpdated), Healthy: true}}}
		f.Nodes[n].Record(h, t0.Add(at), t0.Add(at), f.Rule.Allowance, true)
	}
	sync("n1", -time.Second, -5*time.Second)
	sync("n2", -time.Second, -5*time.Second)
	sync("n1", 600*time.Millisecond, 400*time.Millisecond)
	if r := Judge(f, t0.Add(700*time.Millisecond)).Routing(); r.State != drain.RoutingPending || r.Confirmed {
		t.Fatalf("n2 pending: %s confirmed %v", r.State, r.Confirmed)
	}
	sync("n2", 900*time.Millisecond, 700*time.Millisecond)
	r := Judge(f, t0.Add(time.Second)).Routing()
	if r.State != drain.RoutingWithdrawn || !r.Confirmed || !r.SyncedBy.Equal(t0.Add(700*time.Millisecond)) {
		t.Fatalf("%s confirmed %v by %v, want withdrawn, confirmed by 700ms", r.State, r.Confirmed, r.SyncedBy.Sub(t0))
	}
	f.LoadBalancerDelay = 500 * time.Millisecond
	if r := Judge(f, t0.Add(time.Second)).Routing(); r.State != drain.RoutingWithdrawn || r.Confirmed {
		t.Fatalf("with a load balancer delay: %s confirmed %v, want withdrawn, not confirmed", r.State, r.Confirmed)
	}
}
