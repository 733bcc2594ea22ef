package drain

import (
	"strings"
	"testing"
)

// The pod's own check holds any routing condition until the balancers
// marked the pod down; then a withdrawn one says Balancer, and others keep
// their state.
func TestPodCheckHoldsRouting(t *testing.T) {
	c := PodCheck{Bind: ":8404", Threshold: 1, Failing: true, Failed: []AddrChecks{{"10.0.0.5", 0}}}
	for _, st := range []RoutingState{RoutingWithdrawn, RoutingOff, RoutingUnverified, RoutingPending} {
		got := withPodCheck(Routing{State: st, Why: note("d"), PendingNodes: 2}, &c)
		if got.State != RoutingPending || got.PendingNodes != 2 || !strings.Contains(got.Detail(), "d; load balancers checking the pod at :8404") {
			t.Errorf("%s while checks still pass: %+v, want pending", st, got)
		}
	}
	c.Failed[0].Failed = 1
	got := withPodCheck(Routing{State: RoutingWithdrawn, Why: note("confirmed")}, &c)
	if got.State != RoutingWithdrawn || !got.Balancer ||
		!strings.Contains(got.Detail(), "confirmed; marked down: load balancers checking the pod at :8404: failed checks since the stop, per address (threshold 1): 10.0.0.5 1") {
		t.Errorf("withdrawn once marked down: %+v", got)
	}
	if got := withPodCheck(Routing{State: RoutingOff, Why: note("off")}, &c); got.State != RoutingOff || got.Balancer {
		t.Errorf("off once marked down: %+v, want off", got)
	}
	if got := withPodCheck(Routing{State: RoutingWithdrawn}, nil); got.State != RoutingWithdrawn || got.Balancer {
		t.Errorf("no pod check: %+v, want the routing as fed", got)
	}
}

// The drain decides on the combined condition: a withdrawn verdict with
// the pod check not met does not end the drain's routing condition.
func TestPodCheckInTheDrain(t *testing.T) {
	d := New(settings)
	now := t0
	d.SetPodCheck(PodCheck{Bind: ":8404", Threshold: 2, Failing: true})
	d.SetRouting(Routing{State: RoutingWithdrawn, Why: note("confirmed")}, now)
	if r := d.Routing(); r.State != RoutingPending || !strings.Contains(r.Detail(), "no address checked it") {
		t.Errorf("routing %+v, want pending on the pod check", r)
	}
	d.SetPodCheck(PodCheck{Bind: ":8404", Threshold: 2, Failing: true, Failed: []AddrChecks{{"10.0.0.5", 2}}})
	d.SetRouting(Routing{State: RoutingWithdrawn, Why: note("confirmed")}, now)
	if r := d.Routing(); r.State != RoutingWithdrawn || !r.Balancer || routingReason(r) != ReasonLBMarkedDown {
		t.Errorf("routing %+v, want withdrawn by the balancer", r)
	}
}
