package routing

// Grant is one request a routing mode makes of the apiserver, as
// deploy/overlays/endpointslices/rbac.yaml and kube-proxy/nodes-rbac.yaml
// grant it; `hapsuper check` asks for each.
type Grant struct {
	Verb, Group, Resource string
	Own                   bool // on the pod itself: a review names it
	Cluster               bool // cluster-scoped
	Optional              bool // a drain works without it
	KubeProxy             bool // only ModeKubeProxy makes it
	Why                   string
}

// Grants are the requests of the observer (watch.go, informers.go,
// nodes.go) and the announcer (event.go).
var Grants = []Grant{
	{Verb: "list", Group: "discovery.k8s.io", Resource: "endpointslices", Why: "the slices that list the pod"},
	{Verb: "watch", Group: "discovery.k8s.io", Resource: "endpointslices", Why: "the slices that list the pod"},
	{Verb: "list", Resource: "services", Why: "each slice's Service"},
	{Verb: "watch", Resource: "services", Why: "each slice's Service"},
	{Verb: "get", Resource: "pods", Own: true, Why: "the pod's grace period and paths"},
	{Verb: "watch", Resource: "pods", Own: true, Why: "the pod's deletion"},
	{Verb: "create", Group: "events.k8s.io", Resource: "events", Optional: true, Why: "the Event that says how a drain ended"},
	{Verb: "list", Resource: "nodes", Cluster: true, KubeProxy: true, Why: "every node's kube-proxy address"},
}

// String is the request as RBAC names it: "list endpointslices.discovery.k8s.io".
func (g Grant) String() string {
	r := g.Resource
	if g.Group != "" {
		r += "." + g.Group
	}
	return g.Verb + " " + r
}
