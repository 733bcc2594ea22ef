package routing

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hapsuper/hapsuper/drain"
)

// maxNamed bounds how many paths or nodes a detail names.
const maxNamed = 5

// Routing is the verdict at now. It is recomputed at every call from the
// latest state: withdrawal is not monotonic (kube-proxy puts a
// serving-terminating endpoint back when the last ready one goes). Its
// detail is at most maxDetail bytes.
func (o *Observer) Routing(now time.Time) drain.Routing {
	r := o.verdict(now)
	r.Detail = boundDetail(r.Detail)
	return r
}

// verdict is Routing with its detail whole.
func (o *Observer) verdict(now time.Time) drain.Routing {
	if o.cfg.Mode == ModeOff {
		return drain.Routing{State: drain.RoutingOff, Detail: "routing observation off"}
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.synced {
		d := "watch not synced"
		if o.watch.watchErr != "" {
			d += ": " + o.watch.watchErr
		}
		return drain.Routing{State: drain.RoutingUnverified, Detail: d}
	}
	unobserved := o.unobserved()
	if !o.watch.podSeen {
		unobserved = append([]string{"pod not read (hostNetwork, hostPorts and readiness gates unknown)"}, unobserved...)
	}
	if len(o.watch.paths) == 0 {
		d := "no EndpointSlice lists this pod"
		if len(unobserved) > 0 {
			d += "; not observed: " + named(unobserved)
		}
		return o.hold(drain.Routing{State: drain.RoutingUnverified, Detail: d}, o.stopAt, now)
	}
	keys := make([]pathKey, 0, len(o.watch.paths))
	for k := range o.watch.paths {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b pathKey) int { return strings.Compare(a.String(), b.String()) })
	var pending, withdrawn []string
	var latest time.Time
	for _, k := range keys {
		p := o.watch.paths[k]
		name := o.cfg.Identity.Namespace + "/" + k.String()
		if !p.withdrawn {
			pending = append(pending, name+": "+p.why)
			continue
		}
		withdrawn = append(withdrawn, name)
		if p.since.After(latest) {
			latest = p.since
		}
	}
	if len(pending) > 0 {
		return drain.Routing{State: drain.RoutingPending, Detail: "routed here in the API: " + named(pending)}
	}
	api := fmt.Sprintf("withdrawn in the API %v ago: %s", now.Sub(latest).Round(time.Millisecond), named(withdrawn))
	var r drain.Routing
	if o.cfg.Mode == ModeEndpointSlices {
		r = drain.Routing{State: drain.RoutingWithdrawn, APIOnly: true, Detail: api + " (kube-proxy not observed)"}
	} else {
		r = o.kubeProxyVerdict(api)
	}
	r = o.balancerVerdict(r, now)
	if r.State != drain.RoutingPending && len(unobserved) > 0 {
		// Paths kube-proxy does not carry: never withdrawn, only unverified.
		r = drain.Routing{State: drain.RoutingUnverified, Detail: r.Detail + "; not observed: " + named(unobserved)}
	}
	return o.hold(r, latest, now)
}

// hold keeps a verdict that would let the drain end pending until
// LoadBalancerDelay has passed since from (the withdrawal), for load
// balancers that target pod IPs and keep sending after deregistration.
func (o *Observer) hold(r drain.Routing, from, now time.Time) drain.Routing {
	d := o.cfg.LoadBalancerDelay
	if d <= 0 || r.State == drain.RoutingPending {
		return r
	}
	if from.IsZero() {
		return drain.Routing{State: drain.RoutingPending, Detail: r.Detail + "; load balancer delay not started: the stop is not requested yet"}
	}
	if left := from.Add(d).Sub(now); left > 0 {
		return drain.Routing{State: drain.RoutingPending, Detail: fmt.Sprintf("%s; holding %v more for load balancers to stop sending (load balancer delay %v)",
			r.Detail, left.Round(time.Millisecond), d)}
	}
	return r
}

// kubeProxyVerdict is the verdict once the API says withdrawn, in
// ModeKubeProxy: every node confirmed → withdrawn; any node pending →
// pending; otherwise unverified, naming the nodes not observed.
func (o *Observer) kubeProxyVerdict(api string) drain.Routing {
	api += o.leftDetail()
	switch {
	case o.stopAt.IsZero():
		return drain.Routing{State: drain.RoutingPending, Detail: api + "; kube-proxy is asked once the stop is requested"}
	case o.nodes == nil && o.nodesErr != "":
		return drain.Routing{State: drain.RoutingUnverified, Detail: api + "; " + o.nodesErr}
	case o.nodes == nil:
		return drain.Routing{State: drain.RoutingPending, Detail: api + "; nodes not listed yet"}
	case len(o.nodes) == 0:
		return drain.Routing{State: drain.RoutingUnverified, Detail: api + "; the node list is empty"}
	}
	targets := o.targets()
	names := make([]string, 0, len(o.nodes))
	for name := range o.nodes {
		names = append(names, name)
	}
	slices.Sort(names)
	var pending, unverified []string
	for _, name := range names {
		switch v, why := o.rule.judgeNode(o.nodes[name], targets); v {
		case nodePending:
			pending = append(pending, name+": "+why)
		case nodeUnverified:
			unverified = append(unverified, name+": "+why)
		}
	}
	total := len(names)
	switch {
	case len(pending) > 0:
		return drain.Routing{State: drain.RoutingPending, PendingNodes: len(pending), Detail: fmt.Sprintf(
			"%s; kube-proxy not confirmed on %d of %d nodes: %s", api, len(pending), total, named(pending))}
	case len(unverified) > 0:
		return drain.Routing{State: drain.RoutingUnverified, Detail: fmt.Sprintf(
			"%s; kube-proxy not observed on %d of %d nodes: %s; confirmed on the others", api, len(unverified), total, named(unverified))}
	}
	return drain.Routing{State: drain.RoutingWithdrawn, Detail: fmt.Sprintf("%s; confirmed by kube-proxy on %d nodes", api, total)}
}

// named joins at most maxNamed items and counts the rest.
func named(items []string) string {
	if len(items) <= maxNamed {
		return strings.Join(items, "; ")
	}
	return fmt.Sprintf("%s; and %d more", strings.Join(items[:maxNamed], "; "), len(items)-maxNamed)
}
