package drain

import (
	"fmt"
	"strings"
)

// PodCheck is the condition of the load balancers that health-check the
// pod itself (IP targets, hostNetwork, hostPort) on hapsuper's own check
// (--lb-check-bind): from the stop on, the check fails, and the balancers
// have marked the pod down once every address that was checking has had
// Threshold failed checks since. The supervisor reads the counts; the
// drain combines the condition with Routing (SetPodCheck).
type PodCheck struct {
	Bind      string // where the balancers check the pod
	Threshold int    // the balancers' unhealthy threshold
	// Failing: the check was failed on the workers and read at least once.
	Failing bool
	// Failed is, per checking address, the checks answered 503 since the
	// stop, sorted by address.
	Failed []AddrChecks
	Err    string // the last reading's error
}

// AddrChecks is one checking address and its failed checks.
type AddrChecks struct {
	Addr   string
	Failed uint64
}

// MarkedDown says whether every checking address has had its threshold of
// failed checks.
func (c PodCheck) MarkedDown() bool {
	if !c.Failing || len(c.Failed) == 0 {
		return false
	}
	for _, a := range c.Failed {
		if a.Failed < uint64(c.Threshold) {
			return false
		}
	}
	return true
}

// String says where the check stands: its part of Routing.Detail.
func (c PodCheck) String() string {
	where := "load balancers checking the pod at " + c.Bind
	if !c.Failing {
		return where + ": the check not failed yet"
	}
	var d string
	if len(c.Failed) == 0 {
		d = where + ": no address checked it in the two minutes before the stop, nor since (is the balancer's health check on " + c.Bind + "?)"
	} else {
		parts := make([]string, len(c.Failed))
		for i, a := range c.Failed {
			parts[i] = fmt.Sprintf("%s %d", a.Addr, a.Failed)
		}
		d = fmt.Sprintf("%s: failed checks since the stop, per address (threshold %d): %s", where, c.Threshold, strings.Join(parts, ", "))
	}
	if c.Err != "" {
		d += "; " + c.Err
	}
	return d
}

// withPodCheck is the routing condition with the pod's own check: a
// verdict that would let the drain end stays pending until the balancers
// checking the pod have marked it down; then a withdrawn one says Balancer.
func withPodCheck(r Routing, c *PodCheck) Routing {
	if c == nil {
		return r
	}
	r.PodCheck = c
	switch {
	case !c.MarkedDown() && r.State != RoutingPending:
		r = Routing{State: RoutingPending, PendingNodes: r.PendingNodes, Why: r.Why, PodCheck: c}
	case c.MarkedDown():
		r.Balancer = r.State == RoutingWithdrawn
	}
	return r
}
