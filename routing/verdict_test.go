package routing

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"

	"github.com/hapsuper/hapsuper/routing/judge"
)

func TestJudgeService(t *testing.T) {
	m := judge.Matcher{PodName: "web-0"}
	m.Addrs, _ = me.addrs()
	type want struct {
		withdrawn bool
		why       string // substring
	}
	tests := []struct {
		name   string
		svc    *corev1.Service
		slices []*discovery.EndpointSlice
		want   map[discovery.AddressType]want // families listing the pod
	}{
		{"a ready peer without the pod's port is no other endpoint for it", service("web"),
			[]*discovery.EndpointSlice{
				withPorts(v4("a", "web", mine(servingTermC)), "http", "admin"),
				withPorts(v4("b", "web", peer("n2", readyC)), "http"),
			},
			map[discovery.AddressType]want{"IPv4": {false, "port admin/TCP: serving-terminating with no other ready IPv4 endpoint"}}},
		{"a ready peer on every port of the pod", service("web"),
			[]*discovery.EndpointSlice{
				withPorts(v4("a", "web", mine(servingTermC)), "http", "admin"),
				withPorts(v4("b", "web", peer("n2", readyC)), "http"),
				withPorts(v4("c", "web", ep("10.0.2.2", "n3", "web-2", readyC)), "admin"),
			},
			map[discovery.AddressType]want{"IPv4": {true, "other endpoints ready"}}},
		{"ready endpoint is routed to", service("web"),
			[]*discovery.EndpointSlice{v4("a", "web", mine(readyC), peer("n2", readyC))},
			map[discovery.AddressType]want{"IPv4": {false, "endpoint ready"}}},
		{"nil conditions read as ready", service("web"),
			[]*discovery.EndpointSlice{v4("a", "web", discovery.Endpoint{Addresses: []string{"10.0.0.5"}})},
			map[discovery.AddressType]want{"IPv4": {false, "endpoint ready"}}},
		{"serving-terminating with another ready: withdrawn", service("web"),
			[]*discovery.EndpointSlice{v4("a", "web", mine(servingTermC), peer("n2", readyC))},
			map[discovery.AddressType]want{"IPv4": {true, "other endpoints ready"}}},
		{"another ready endpoint in another slice of the Service counts", service("web"),
			[]*discovery.EndpointSlice{v4("a", "web", mine(servingTermC)), v4("b", "web", peer("n2", readyC))},
			map[discovery.AddressType]want{"IPv4": {true, ""}}},
		{"serving-terminating alone: kube-proxy falls back to it", service("web"),
			[]*discovery.EndpointSlice{v4("a", "web", mine(servingTermC), peer("n2", servingTermC))},
			map[discovery.AddressType]want{"IPv4": {false, "no other ready IPv4 endpoint"}}},
		{"not serving: withdrawn even alone", service("web"),
			[]*discovery.EndpointSlice{v4("a", "web", mine(goneC))},
			map[discovery.AddressType]want{"IPv4": {true, "not serving"}}},
		{"serving but not terminating is no fallback", service("web"),
			[]*discovery.EndpointSlice{v4("a", "web", mine(cond{serving: true}))},
			map[discovery.AddressType]want{"IPv4": {true, "not serving"}}},
		{"dual-stack: each family needs its own ready peer", service("web"),
			[]*discovery.EndpointSlice{
				v4("a4", "web", mine(servingTermC), peer("n2", readyC)),
				v6("a6", "web", mine6(servingTermC), peer6("n2", servingTermC)),
			},
			map[discovery.AddressType]want{"IPv4": {true, ""}, "IPv6": {false, "no other ready IPv6 endpoint"}}},
		{"externalTrafficPolicy Local: a ready peer elsewhere is not enough", service("web", loadBalancerLocal),
			[]*discovery.EndpointSlice{v4("a", "web", mine(servingTermC), peer("n2", readyC))},
			map[discovery.AddressType]want{"IPv4": {false, "on node n1: externalTrafficPolicy Local"}}},
		{"externalTrafficPolicy Local: a ready peer on this node", service("web", loadBalancerLocal),
			[]*discovery.EndpointSlice{v4("a", "web", mine(servingTermC), peer("n1", readyC))},
			map[discovery.AddressType]want{"IPv4": {true, ""}}},
		{"externalTrafficPolicy Local: not serving needs no peer", service("web", loadBalancerLocal),
			[]*discovery.EndpointSlice{v4("a", "web", mine(goneC), peer("n2", readyC))},
			map[discovery.AddressType]want{"IPv4": {true, "not serving"}}},
		{"externalTrafficPolicy Local without external access is ignored", service("web", func(s *corev1.Service) {
			s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
		}), []*discovery.EndpointSlice{v4("a", "web", mine(servingTermC), peer("n2", readyC))},
			map[discovery.AddressType]want{"IPv4": {true, ""}}},
		{"internalTrafficPolicy Local", service("web", internalLocal),
			[]*discovery.EndpointSlice{v4("a", "web", mine(servingTermC), peer("n2", readyC))},
			map[discovery.AddressType]want{"IPv4": {false, "internalTrafficPolicy Local"}}},
		{"publishNotReadyAddresses keeps it ready", service("web", func(s *corev1.Service) { s.Spec.PublishNotReadyAddresses = true }),
			[]*discovery.EndpointSlice{v4("a", "web", mine(cond{ready: true, serving: true, terminating: true}), peer("n2", readyC))},
			map[discovery.AddressType]want{"IPv4": {false, "publishNotReadyAddresses"}}},
		{"another pod at this address is neither this pod nor a peer", service("web"),
			[]*discovery.EndpointSlice{v4("a", "web", mine(servingTermC), ep("10.0.0.5", "n1", "hostnet-1", readyC))},
			map[discovery.AddressType]want{"IPv4": {false, "no other ready"}}},
		{"an endpoint without targetRef at this address is this pod", service("web"),
			[]*discovery.EndpointSlice{v4("a", "web", ep("10.0.0.5", "n1", "", readyC))},
			map[discovery.AddressType]want{"IPv4": {false, "endpoint ready"}}},
		{"not listed", service("web"),
			[]*discovery.EndpointSlice{v4("a", "web", peer("n2", readyC))},
			map[discovery.AddressType]want{}},
		{"Service not seen yet", nil,
			[]*discovery.EndpointSlice{v4("a", "web", mine(goneC))},
			map[discovery.AddressType]want{"IPv4": {false, "Service not seen"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := judge.Service(tt.svc, tt.slices, m, "n1")
			if len(got) != len(tt.want) {
				t.Fatalf("verdicts = %+v, want families %v", got, tt.want)
			}
			for fam, w := range tt.want {
				g, ok := got[fam]
				if !ok || g.Withdrawn != w.withdrawn || !strings.Contains(g.Why, w.why) {
					t.Errorf("%s: got %+v, want withdrawn=%v why~%q", fam, g, w.withdrawn, w.why)
				}
			}
		})
	}
}

// withPorts gives a slice TCP ports of the given names (numbers from 8080).
func withPorts(s *discovery.EndpointSlice, names ...string) *discovery.EndpointSlice {
	for i, name := range names {
		n, proto := int32(8080+i), corev1.ProtocolTCP
		s.Ports = append(s.Ports, discovery.EndpointPort{Name: &name, Protocol: &proto, Port: &n})
	}
	return s
}
