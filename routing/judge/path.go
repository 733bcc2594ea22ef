package judge

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
)

// Labels kube-proxy reads on EndpointSlices and Services.
const (
	LabelServiceName = discovery.LabelServiceName                 // kubernetes.io/service-name
	LabelProxyName   = "service.kubernetes.io/service-proxy-name" // another proxy programs it
	LabelHeadless    = corev1.IsHeadlessService                   // service.kubernetes.io/headless
)

// PathVerdict is the API verdict on one path: one Service, one address
// family.
type PathVerdict struct {
	Withdrawn bool
	Why       string // what the verdict rests on, for the detail
	// Balancer, on a withdrawn verdict, is the external path that still
	// sends here until a load balancer marks the node down (balancer.go).
	Balancer *BalancerPath
}

// Matcher recognises this pod's endpoints: PodName and Addrs (the pod's
// IPs) are the pod's identity.
//
// An endpoint is this pod's when one of its addresses is a pod IP and its
// targetRef, when set, names this pod. The address decides because it is what
// kube-proxy programs: a slice written by hand or mirrored from Endpoints may
// have no targetRef and still route here. The targetRef check keeps out
// another pod at the same address (hostNetwork pods share the node's IP).
type Matcher struct {
	PodName string
	Addrs   []netip.Addr
}

// EndpointKind is how an endpoint relates to this pod.
type EndpointKind int

const (
	OtherPod    EndpointKind = iota // routes elsewhere
	ThisPod                         // routes here
	SameAddress                     // another pod at this pod's address: neither
)

// Kind says how ep relates to this pod.
func (m Matcher) Kind(ep discovery.Endpoint) EndpointKind {
	hit := false
	for _, s := range ep.Addresses {
		if a, err := netip.ParseAddr(s); err == nil {
			for _, mine := range m.Addrs {
				if a.Unmap() == mine {
					hit = true
				}
			}
		}
	}
	switch {
	case !hit:
		return OtherPod
	case ep.TargetRef == nil, ep.TargetRef.Kind == "Pod" && ep.TargetRef.Name == m.PodName:
		return ThisPod
	}
	return SameAddress
}

// kube-proxy's reading of endpoint conditions (pkg/proxy/endpointslicecache.go):
// nil ready and nil serving mean true, nil terminating means false.
func IsReady(ep discovery.Endpoint) bool {
	return ep.Conditions.Ready == nil || *ep.Conditions.Ready
}

// isFallback says whether kube-proxy would use the endpoint when no endpoint
// is ready: serving and terminating (pkg/proxy/topology.go).
func isFallback(ep discovery.Endpoint) bool {
	serving := ep.Conditions.Serving == nil || *ep.Conditions.Serving
	terminating := ep.Conditions.Terminating != nil && *ep.Conditions.Terminating
	return serving && terminating
}

// Proxied says whether kube-proxy programs the Service at all.
func Proxied(svc *corev1.Service) bool {
	if svc.Spec.Type == corev1.ServiceTypeExternalName || svc.Spec.ClusterIP == corev1.ClusterIPNone {
		return false
	}
	_, other := svc.Labels[LabelProxyName]
	_, headless := svc.Labels[LabelHeadless]
	return !other && !headless
}

// ProxiedSlice says whether kube-proxy programs the slice's endpoints.
func ProxiedSlice(s *discovery.EndpointSlice) bool {
	_, other := s.Labels[LabelProxyName]
	_, headless := s.Labels[LabelHeadless]
	return !other && !headless && s.Labels[LabelServiceName] != "" &&
		(s.AddressType == discovery.AddressTypeIPv4 || s.AddressType == discovery.AddressTypeIPv6)
}

// localPolicy says whether some of the Service's traffic only goes to
// endpoints on the node it entered (pkg/api/v1/service: ExternalPolicyLocal,
// InternalPolicyLocal).
func localPolicy(svc *corev1.Service) (bool, string) {
	external := svc.Spec.Type == corev1.ServiceTypeLoadBalancer || svc.Spec.Type == corev1.ServiceTypeNodePort ||
		(svc.Spec.Type == corev1.ServiceTypeClusterIP && len(svc.Spec.ExternalIPs) > 0)
	if external && svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal {
		return true, "externalTrafficPolicy Local"
	}
	if internalPolicyLocal(svc) {
		return true, "internalTrafficPolicy Local"
	}
	return false, ""
}

// internalPolicyLocal says whether the Service's cluster traffic only goes to
// endpoints on the node it entered.
func internalPolicyLocal(svc *corev1.Service) bool {
	p := svc.Spec.InternalTrafficPolicy
	return p != nil && *p == corev1.ServiceInternalTrafficPolicyLocal
}

// portKey is a Service port as kube-proxy groups endpoints: by the slice
// port's name and protocol (pkg/proxy/endpointslicecache.go). A slice
// without valid ports counts as one unnamed port, so that a pod listed only
// there is still judged.
type portKey struct {
	name     string
	protocol corev1.Protocol
}

func (k portKey) String() string {
	if k.name == "" {
		return string(k.protocol)
	}
	return k.name + "/" + string(k.protocol)
}

// slicePorts are the ports kube-proxy takes from a slice: named, with a
// non-zero number.
func slicePorts(s *discovery.EndpointSlice) []portKey {
	var out []portKey
	for _, p := range s.Ports {
		if p.Name == nil || p.Port == nil || *p.Port == 0 {
			continue
		}
		k := portKey{name: *p.Name, protocol: corev1.ProtocolTCP}
		if p.Protocol != nil {
			k.protocol = *p.Protocol
		}
		out = append(out, k)
	}
	if len(out) == 0 {
		out = append(out, portKey{})
	}
	return out
}

// Service gives the verdict of every family in which the Service's
// slices list this pod. svc nil means the Service is not (yet) seen; the
// caller skips Services kube-proxy does not program. slices are the
// Service's Proxied slices.
//
// kube-proxy picks endpoints per Service port: a ready peer whose slice
// lacks the port (a named targetPort the peer does not have) is no other
// endpoint for it. A family is withdrawn when every port the pod is listed
// for is.
func Service(svc *corev1.Service, slices []*discovery.EndpointSlice, m Matcher, node string) map[discovery.AddressType]PathVerdict {
	type group struct {
		fam         discovery.AddressType
		port        portKey
		mine, other []discovery.Endpoint
	}
	groups := map[discovery.AddressType]map[portKey]*group{}
	for _, s := range slices {
		byPort := groups[s.AddressType]
		if byPort == nil {
			byPort = map[portKey]*group{}
			groups[s.AddressType] = byPort
		}
		ports := slicePorts(s)
		for _, ep := range s.Endpoints {
			kind := m.Kind(ep)
			if kind == SameAddress {
				continue
			}
			for _, pk := range ports {
				g := byPort[pk]
				if g == nil {
					g = &group{fam: s.AddressType, port: pk}
					byPort[pk] = g
				}
				if kind == ThisPod {
					g.mine = append(g.mine, ep)
				} else {
					g.other = append(g.other, ep)
				}
			}
		}
	}
	out := map[discovery.AddressType]PathVerdict{}
	for fam, byPort := range groups {
		var listed []*group
		for _, g := range byPort {
			if len(g.mine) > 0 {
				listed = append(listed, g)
			}
		}
		if len(listed) == 0 {
			continue
		}
		if svc == nil {
			out[fam] = PathVerdict{Why: "Service not seen"}
			continue
		}
		// The first port still routed here decides, in a stable order.
		sortGroups(listed, func(g *group) string { return g.port.String() })
		var v PathVerdict
		for _, g := range listed {
			v = judgeFamily(svc, fam, g.mine, g.other, node)
			if !v.Withdrawn {
				if len(listed) > 1 || g.port.name != "" {
					v.Why = "port " + g.port.String() + ": " + v.Why
				}
				break
			}
		}
		out[fam] = v
	}
	return out
}

// sortGroups orders groups by key.
func sortGroups[G any](gs []G, key func(G) string) {
	slices.SortFunc(gs, func(a, b G) int { return strings.Compare(key(a), key(b)) })
}

// judgeFamily is the withdrawal rule for one Service and one family, given
// the endpoints that are this pod's (mine, at least one) and the others.
func judgeFamily(svc *corev1.Service, fam discovery.AddressType, mine, others []discovery.Endpoint, node string) PathVerdict {
	ready, fallback := false, false
	for _, ep := range mine {
		ready = ready || IsReady(ep)
		fallback = fallback || isFallback(ep)
	}
	switch {
	case ready && svc.Spec.PublishNotReadyAddresses:
		return PathVerdict{Why: "publishNotReadyAddresses keeps the endpoint ready: kube-proxy routes to it until it is removed"}
	case ready:
		return PathVerdict{Why: "endpoint ready"}
	case !fallback:
		return PathVerdict{Withdrawn: true, Why: "endpoint not serving"}
	}
	otherReady, otherReadyHere := false, false
	for _, ep := range others {
		if IsReady(ep) {
			otherReady = true
			otherReadyHere = otherReadyHere || (ep.NodeName != nil && *ep.NodeName == node)
		}
	}
	if !otherReady {
		return PathVerdict{Why: fmt.Sprintf("serving-terminating with no other ready %s endpoint: kube-proxy falls back to it", fam)}
	}
	if local, policy := localPolicy(svc); local && !otherReadyHere {
		b := externalCheck(svc)
		if internalPolicyLocal(svc) || b == nil {
			why := fmt.Sprintf("serving-terminating with no other ready %s endpoint on node %s: %s falls back to it", fam, node, policy)
			if !internalPolicyLocal(svc) {
				why += " (no healthCheckNodePort tells a load balancer to stop sending)"
			}
			return PathVerdict{Why: why}
		}
		// kube-proxy's rules send the Service's cluster traffic to the
		// other endpoints; the node's external traffic still comes here,
		// until the balancer that health-checks the node stops sending.
		return PathVerdict{Withdrawn: true, Balancer: b, Why: fmt.Sprintf(
			"endpoint not ready, other endpoints ready; externalTrafficPolicy Local: node %s's external traffic falls back to it until the load balancer marks the node down", node)}
	}
	return PathVerdict{Withdrawn: true, Why: "endpoint not ready, other endpoints ready"}
}
