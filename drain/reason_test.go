package drain

import "testing"

// A withdrawal observed in the API alone ends a drain with its own reason,
// so that metrics, Events and the status tell it from one kube-proxy
// confirmed.
func TestRoutingReasonAPIOnly(t *testing.T) {
	for _, tt := range []struct {
		r    Routing
		want Reason
	}{
		{Routing{State: RoutingWithdrawn}, ReasonRoutedAway},
		{Routing{State: RoutingWithdrawn, APIOnly: true}, ReasonWithdrawnInAPI},
		{Routing{State: RoutingWithdrawn, Balancer: true}, ReasonLBMarkedDown},
		{Routing{State: RoutingWithdrawn, Balancer: true, APIOnly: true}, ReasonWithdrawnInAPI},
		{Routing{State: RoutingUnverified, Balancer: true}, ReasonUnverified},
		{Routing{State: RoutingUnverified, APIOnly: true}, ReasonUnverified},
		{Routing{State: RoutingOff}, ReasonQuiet},
	} {
		if got := routingReason(tt.r); got != tt.want {
			t.Errorf("routingReason(%+v) = %s, want %s", tt.r, got, tt.want)
		}
	}
}
