package routing

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
	labelServiceName = discovery.LabelServiceName                 // kubernetes.io/service-name
	labelProxyName   = "service.kubernetes.io/service-proxy-name" // another proxy programs it
	labelHeadless    = corev1.IsHeadlessService                   // service.kubernetes.io/headless
)

// pathVerdict is the API verdict on one path: one Service, one address
// family.
type pathVerdict struct {
	withdrawn bool
	why       string // what the verdict rests on, for the detail
	// balancer, on a withdrawn verdict, is the external path that still
	// sends here until a load balancer marks the node down (balancer.go).
	balancer *balancerPath
}

// matcher recognises this pod's endpoints.
//
// An endpoint is this pod's when one of its addresses is a pod IP and its
// targetRef, when set, names this pod. The address decides because it is what
// kube-proxy programs: a slice written by hand or mirrored from Endpoints may
// have no targetRef and still route here. The targetRef check keeps out
// another pod at the same address (hostNetwork pods share the node's IP).
type matcher struct {
	podName string
	addrs   []netip.Addr
}

// endpointKind is how an endpoint relates to this pod.
type endpointKind int

const (
	otherPod    endpointKind = iota // routes elsewhere
	thisPod                         // routes here
	sameAddress                     // another pod at this pod's address: neither
)

func (m matcher) kind(ep discovery.Endpoint) endpointKind {
	hit := false
	for _, s := range ep.Addresses {
		if a, err := netip.ParseAddr(s); err == nil {
			for _, mine := range m.addrs {
				if a.Unmap() == mine {
					hit = true
				}
			}
		}
	}
	switch {
	case !hit:
		return otherPod
	case ep.TargetRef == nil, ep.TargetRef.Kind == "Pod" && ep.TargetRef.Name == m.podName:
		return thisPod
	}
	return sameAddress
}

// kube-proxy's reading of endpoint conditions (pkg/proxy/endpointslicecache.go):
// nil ready and nil serving mean true, nil terminating means false.
func isReady(ep discovery.Endpoint) bool {
	return ep.Conditions.Ready == nil || *ep.Conditions.Ready
}

// isFallback says whether kube-proxy would use the endpoint when no endpoint
// is ready: serving and terminating (pkg/proxy/topology.go).
func isFallback(ep discovery.Endpoint) bool {
	serving := ep.Conditions.Serving == nil || *ep.Conditions.Serving
	terminating := ep.Conditions.Terminating != nil && *ep.Conditions.Terminating
	return serving && terminating
}

// proxied says whether kube-proxy programs the Service at all.
func proxied(svc *corev1.Service) bool {
	if svc.Spec.Type == corev1.ServiceTypeExternalName || svc.Spec.ClusterIP == corev1.ClusterIPNone {
		return false
	}
	_, other := svc.Labels[labelProxyName]
	_, headless := svc.Labels[labelHeadless]
	return !other && !headless
}

// proxiedSlice says whether kube-proxy programs the slice's endpoints.
func proxiedSlice(s *discovery.EndpointSlice) bool {
	_, other := s.Labels[labelProxyName]
	_, headless := s.Labels[labelHeadless]
	return !other && !headless && s.Labels[labelServiceName] != "" &&
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

// judgeService gives the verdict of every family in which the Service's
// slices list this pod. svc nil means the Service is not (yet) seen; the
// caller skips Services kube-proxy does not program. slices are the
// Service's proxied slices.
//
// kube-proxy picks endpoints per Service port: a ready peer whose slice
// lacks the port (a named targetPort the peer does not have) is no other
// endpoint for it. A family is withdrawn when every port the pod is listed
// for is.
func judgeService(svc *corev1.Service, slices []*discovery.EndpointSlice, m matcher, node string) map[discovery.AddressType]pathVerdict {
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
			kind := m.kind(ep)
			if kind == sameAddress {
				continue
			}
			for _, pk := range ports {
				g := byPort[pk]
				if g == nil {
					g = &group{fam: s.AddressType, port: pk}
					byPort[pk] = g
				}
				if kind == thisPod {
					g.mine = append(g.mine, ep)
				} else {
					g.other = append(g.other, ep)
				}
			}
		}
	}
	out := map[discovery.AddressType]pathVerdict{}
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
			out[fam] = pathVerdict{why: "Service not seen"}
			continue
		}
		// The first port still routed here decides, in a stable order.
		sortGroups(listed, func(g *group) string { return g.port.String() })
		var v pathVerdict
		for _, g := range listed {
			v = judgeFamily(svc, fam, g.mine, g.other, node)
			if !v.withdrawn {
				if len(listed) > 1 || g.port.name != "" {
					v.why = "port " + g.port.String() + ": " + v.why
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
func judgeFamily(svc *corev1.Service, fam discovery.AddressType, mine, others []discovery.Endpoint, node string) pathVerdict {
	ready, fallback := false, false
	for _, ep := range mine {
		ready = ready || isReady(ep)
		fallback = fallback || isFallback(ep)
	}
	switch {
	case ready && svc.Spec.PublishNotReadyAddresses:
		return pathVerdict{why: "publishNotReadyAddresses keeps the endpoint ready: kube-proxy routes to it until it is removed"}
	case ready:
		return pathVerdict{why: "endpoint ready"}
	case !fallback:
		return pathVerdict{withdrawn: true, why: "endpoint not serving"}
	}
	otherReady, otherReadyHere := false, false
	for _, ep := range others {
		if isReady(ep) {
			otherReady = true
			otherReadyHere = otherReadyHere || (ep.NodeName != nil && *ep.NodeName == node)
		}
	}
	if !otherReady {
		return pathVerdict{why: fmt.Sprintf("serving-terminating with no other ready %s endpoint: kube-proxy falls back to it", fam)}
	}
	if local, policy := localPolicy(svc); local && !otherReadyHere {
		b := externalCheck(svc)
		if internalPolicyLocal(svc) || b == nil {
			why := fmt.Sprintf("serving-terminating with no other ready %s endpoint on node %s: %s falls back to it", fam, node, policy)
			if !internalPolicyLocal(svc) {
				why += " (no healthCheckNodePort tells a load balancer to stop sending)"
			}
			return pathVerdict{why: why}
		}
		// kube-proxy's rules send the Service's cluster traffic to the
		// other endpoints; the node's external traffic still comes here,
		// until the balancer that health-checks the node stops sending.
		return pathVerdict{withdrawn: true, balancer: b, why: fmt.Sprintf(
			"endpoint not ready, other endpoints ready; externalTrafficPolicy Local: node %s's external traffic falls back to it until the load balancer marks the node down", node)}
	}
	return pathVerdict{withdrawn: true, why: "endpoint not ready, other endpoints ready"}
}
