package judge

import (
	"fmt"
	"time"

	"github.com/hapsuper/hapsuper/drain"
)

// Verdict is the routing verdict as typed conditions, in the order they
// apply: the watch, the API's paths, kube-proxy's confirmation, the
// balancers that health-check the node, the paths not observed and the
// load balancer delay. Routing combines them into the drain's state and
// carries them on, typed; Text renders the detail where it is shown.
type Verdict struct {
	NotSynced bool   // the watches have not delivered their lists
	WatchErr  string // why, when a watch failed
	NoPaths   bool   // no EndpointSlice lists the pod
	API       API
	// KubeProxy is kube-proxy's confirmation; nil: not observed
	// (endpointslices mode), or the API still routes here.
	KubeProxy *KubeProxy
	// NodeBalancers: the balancers that health-check the node, for the
	// withdrawn paths whose node's external traffic still comes here; nil
	// when there are none.
	NodeBalancers *NodeBalancers
	Unobserved    []string // paths kube-proxy does not carry: never withdrawn
	Hold          *Hold    // the load balancer delay; nil: none
}

// API is the API's verdict on the paths, sorted: any pending one holds.
type API struct {
	Pending   []string      // "namespace/service (family): why"
	Withdrawn []string      // "namespace/service (family)"
	Ago       time.Duration // since the latest withdrawal
}

// KubeProxyPhase is how far kube-proxy's confirmation got.
type KubeProxyPhase int

// The phases of kube-proxy's confirmation.
const (
	KubeProxyNotAsked   KubeProxyPhase = iota // the stop is not requested yet
	KubeProxyListFailed                       // the node list could not be read (Err)
	KubeProxyNotListed                        // the node list is not read yet
	KubeProxyNoNodes                          // the node list is empty
	KubeProxyJudged                           // every node judged: Pending, Unverified
)

// KubeProxy is kube-proxy's confirmation of a withdrawal in the API.
type KubeProxy struct {
	Phase      KubeProxyPhase
	Err        string
	Left       []string // nodes that left the set: "name why"
	Total      int      // nodes judged
	Pending    []string // "node: why", nodes that may still route here
	Unverified []string // "node: why", nodes not observed
	// ByMetrics are the confirmed nodes whose confirmation needed
	// kube-proxy's metrics (Rule.Witness); healthz alone confirmed the
	// others.
	ByMetrics []string
	// SyncedBy is the confirmation's evidence once every node confirmed:
	// the latest completion of the last node's confirming sync, our clock
	// (Rule.SyncedBy); zero when a node's confirmation is undated.
	SyncedBy time.Time
	undated  bool
}

// CheckPhase is where one node health check stands.
type CheckPhase int

// The phases of a node health check, the last one met.
const (
	CheckNoHostIP     CheckPhase = iota // the pod's node address is not known
	CheckNotAsked                       // no answer yet
	CheckNotFailing                     // its last answer does not fail
	CheckNoWindow                       // failing, but the balancer's window is unknown
	CheckWithinWindow                   // failing for less than the window
	CheckWindowPassed                   // failing for the window: the balancer marked the node down
)

// ServiceCheck is one Service's node health check.
type ServiceCheck struct {
	Service string // namespace/name
	Phase   CheckPhase
	URL     string
	Answer  string        // the last answer
	Failing time.Duration // how long it has been seen failing
	Window  time.Duration // the balancer's window; 0: unknown
	Source  string        // where the window comes from, or why it is unknown
}

// NodeBalancers is the condition of the balancers that health-check the
// pod's node.
type NodeBalancers struct {
	Node   string
	Checks []ServiceCheck // sorted by Service
}

// Hold is the load balancer delay after the withdrawal.
type Hold struct {
	Delay      time.Duration
	NotStarted bool          // the stop is not requested, and no withdrawal started it
	Left       time.Duration // what is left of it; ≤ 0: passed
}

// Routing combines the conditions into the drain's routing condition,
// which carries them typed (Why) to where its detail is shown.
func (v Verdict) Routing() drain.Routing {
	c := v.combine()
	r := drain.Routing{State: c.State, PendingNodes: c.PendingNodes, APIOnly: c.APIOnly, Balancer: c.Balancer, Why: &v}
	if v.confirmed(c) {
		r.Confirmed, r.SyncedBy = true, v.KubeProxy.SyncedBy
	}
	return r
}

// confirmed says the withdrawn verdict rests on kube-proxy alone: every
// node confirmed the withdrawal, and no balancer, load balancer delay or
// unobserved path stands beside it. Only then does the confirmation date
// when the last new connection can have been sent here.
func (v Verdict) confirmed(c combined) bool {
	return c.State == drain.RoutingWithdrawn && !c.APIOnly && !c.Balancer &&
		v.KubeProxy != nil && v.KubeProxy.Phase == KubeProxyJudged &&
		v.NodeBalancers == nil && v.Hold == nil && len(v.Unobserved) == 0
}

// Text is the conditions as the detail says them, bounded to MaxDetail
// bytes: routing's part of drain.Routing.Detail, the one renderer.
func (v Verdict) Text() string { return boundDetail(v.combine().Detail) }

// combined is the conditions combined in order: the state they give and
// the detail's text, written by the same step that decides.
type combined struct {
	State        drain.RoutingState
	Detail       string
	PendingNodes int
	APIOnly      bool
	Balancer     bool
}

func (v Verdict) combine() combined {
	switch {
	case v.NotSynced:
		d := "watch not synced"
		if v.WatchErr != "" {
			d += ": " + v.WatchErr
		}
		return combined{State: drain.RoutingUnverified, Detail: d}
	case v.NoPaths:
		d := "no EndpointSlice lists this pod"
		if len(v.Unobserved) > 0 {
			d += "; not observed: " + named(v.Unobserved)
		}
		return v.Hold.apply(combined{State: drain.RoutingUnverified, Detail: d})
	case len(v.API.Pending) > 0:
		return combined{State: drain.RoutingPending, Detail: "routed here in the API: " + named(v.API.Pending)}
	}
	api := fmt.Sprintf("withdrawn in the API %v ago: %s", v.API.Ago.Round(time.Millisecond), named(v.API.Withdrawn))
	var r combined
	if v.KubeProxy == nil {
		r = combined{State: drain.RoutingWithdrawn, APIOnly: true, Detail: api + " (kube-proxy not observed)"}
	} else {
		r = v.KubeProxy.apply(api)
	}
	r = v.NodeBalancers.apply(r)
	if r.State != drain.RoutingPending && len(v.Unobserved) > 0 {
		// Paths kube-proxy does not carry: never withdrawn, only unverified.
		r = combined{State: drain.RoutingUnverified, Detail: r.Detail + "; not observed: " + named(v.Unobserved)}
	}
	return v.Hold.apply(r)
}

// apply is the verdict once the API says withdrawn (api): every node
// confirmed → withdrawn; any node pending → pending; otherwise unverified,
// naming the nodes not observed.
func (kp *KubeProxy) apply(api string) combined {
	if len(kp.Left) > 0 {
		api += fmt.Sprintf("; %d nodes left the set: %s", len(kp.Left), named(kp.Left))
	}
	switch kp.Phase {
	case KubeProxyNotAsked:
		return combined{State: drain.RoutingPending, Detail: api + "; kube-proxy is asked once the stop is requested"}
	case KubeProxyListFailed:
		return combined{State: drain.RoutingUnverified, Detail: api + "; " + kp.Err}
	case KubeProxyNotListed:
		return combined{State: drain.RoutingPending, Detail: api + "; nodes not listed yet"}
	case KubeProxyNoNodes:
		return combined{State: drain.RoutingUnverified, Detail: api + "; the node list is empty"}
	}
	switch {
	case len(kp.Pending) > 0:
		return combined{State: drain.RoutingPending, PendingNodes: len(kp.Pending), Detail: fmt.Sprintf(
			"%s; kube-proxy not confirmed on %d of %d nodes: %s", api, len(kp.Pending), kp.Total, named(kp.Pending))}
	case len(kp.Unverified) > 0:
		return combined{State: drain.RoutingUnverified, Detail: fmt.Sprintf(
			"%s; kube-proxy not observed on %d of %d nodes: %s; confirmed on the others", api, len(kp.Unverified), kp.Total, named(kp.Unverified))}
	}
	d := fmt.Sprintf("%s; confirmed by kube-proxy on %d nodes", api, kp.Total)
	if len(kp.ByMetrics) > 0 {
		d += fmt.Sprintf(" (witness: healthz on %d, metrics on %d: %s)", kp.Total-len(kp.ByMetrics), len(kp.ByMetrics), named(kp.ByMetrics))
	}
	return combined{State: drain.RoutingWithdrawn, Detail: d}
}

// apply holds a verdict that would let the drain end while an external
// path still sends here: pending until, for every withdrawn path with a
// balancer, the node's health check has been seen failing for the
// balancer's window. Once all have, a withdrawn verdict says Balancer.
func (nb *NodeBalancers) apply(r combined) combined {
	if nb == nil || r.State == drain.RoutingPending {
		return r
	}
	var pending, met []string
	for _, c := range nb.Checks {
		if c.Phase == CheckWindowPassed {
			met = append(met, c.String())
		} else {
			pending = append(pending, c.String())
		}
	}
	if len(pending) > 0 {
		return combined{State: drain.RoutingPending, PendingNodes: r.PendingNodes, Detail: fmt.Sprintf(
			"%s; external traffic to node %s (externalTrafficPolicy Local, no other ready pod there) still comes here until the load balancer marks the node down: %s",
			r.Detail, nb.Node, named(pending))}
	}
	r.Detail += fmt.Sprintf("; external path via node %s withdrawn by the load balancer: %s", nb.Node, named(met))
	r.Balancer = r.State == drain.RoutingWithdrawn
	return r
}

// String says where the check stands, for the detail.
func (c ServiceCheck) String() string {
	switch c.Phase {
	case CheckNoHostIP:
		return c.Service + ": the pod's hostIP is not known yet"
	case CheckNotAsked:
		return fmt.Sprintf("%s: health check %s not asked yet", c.Service, c.URL)
	case CheckNotFailing:
		return fmt.Sprintf("%s: health check %s not failing (%s)", c.Service, c.URL, c.Answer)
	case CheckNoWindow:
		return fmt.Sprintf("%s: health check %s failing for %s; the load balancer's window is %s", c.Service, c.URL, ago(c.Failing), c.Source)
	case CheckWithinWindow:
		return fmt.Sprintf("%s: health check %s failing for %s; the load balancer marks the node down within %v (%s): %s more",
			c.Service, c.URL, ago(c.Failing), c.Window, c.Source, (c.Window - c.Failing).Round(time.Millisecond))
	}
	return fmt.Sprintf("%s: health check %s failing for %s (%s), window %v (%s) passed",
		c.Service, c.URL, ago(c.Failing), c.Answer, c.Window, c.Source)
}

// apply keeps a verdict that would let the drain end pending until the
// load balancer delay has passed, for load balancers that target pod IPs
// and keep sending after deregistration.
func (h *Hold) apply(r combined) combined {
	if h == nil || r.State == drain.RoutingPending {
		return r
	}
	if h.NotStarted {
		return combined{State: drain.RoutingPending, Detail: r.Detail + "; load balancer delay not started: the stop is not requested yet"}
	}
	if h.Left > 0 {
		return combined{State: drain.RoutingPending, Detail: fmt.Sprintf("%s; holding %v more for load balancers to stop sending (load balancer delay %v)",
			r.Detail, h.Left.Round(time.Millisecond), h.Delay)}
	}
	return r
}
