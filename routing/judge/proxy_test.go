package judge

import (
	"testing"
	"time"

	discovery "k8s.io/api/discovery/v1"
)

// An answer from a proxy whose lastUpdated is no sync (Cilium,
// OVN-Kubernetes) is refused however it reads: even stamped per family,
// late enough to confirm, and on the connection that answered before, it
// leaves the node unverified, naming the proxy; the stamps of the same
// shape from kube-proxy's code confirm.
func TestNodeRefusesAnEmulatedStamp(t *testing.T) {
	for _, p := range []Proxy{ProxyEmulated, ProxyOVN} {
		t.Run(p.String(), func(t *testing.T) {
			s := newNodeScenario(t)
			at := s.t0.Add(3 * time.Second)
			for i := range 3 { // answers 500 ms apart on one connection
				sent := at.Add(time.Duration(i) * 500 * ms)
				h := Healthz{CurrentTime: sent.Add(5 * ms), Proxy: p, Families: map[discovery.AddressType]FamilyHealth{
					discovery.AddressTypeIPv4: {LastUpdated: sent, Healthy: true}}}
				s.n.Record(h, sent, sent.Add(10*ms), s.rule.Allowance, i > 0)
			}
			s.expect(NodeUnverified, "answers as "+p.String())
		})
	}
	s := newNodeScenario(t)
	s.answer(1100*ms, 10*ms, 900*ms) // kube-proxy's code: Proxy not named in the Healthz
	s.answer(1500*ms, 10*ms, 1300*ms)
	s.expect(NodeConfirmed, "")
}

// After an emulated answer, a kube-proxy answer is another process's: its
// new lastUpdated may be a start stamp and does not confirm by itself.
func TestNodeAfterAnEmulatedAnswer(t *testing.T) {
	s := newNodeScenario(t)
	s.answer(1100*ms, 10*ms, 900*ms)
	sent := s.t0.Add(1200 * ms)
	s.n.Record(Healthz{CurrentTime: sent, Proxy: ProxyEmulated}, sent, sent.Add(10*ms), s.rule.Allowance, true)
	s.fresh = true                    // another process: another connection
	s.answer(1700*ms, 10*ms, 1500*ms) // late enough, but first after a refused answer
	s.expect(NodePending, "healthz failed before this lastUpdated")
}

// Cilium's healthCheckNodePort server answers with kube-proxy's JSON
// without serviceProxyHealthy (json.Encoder's trailing newline included),
// 503 once the node has no active local backend: the external path's
// window can be read there as from kube-proxy.
func TestReadServiceHealthCilium(t *testing.T) {
	failing, answer := ReadServiceHealth(503, []byte(`{"service":{"namespace":"default","name":"web"},"localEndpoints":0}`+"\n"), "default", "web")
	if !failing || answer != "HTTP 503, localEndpoints 0" {
		t.Fatalf("ReadServiceHealth = %v, %q; want failing", failing, answer)
	}
	failing, _ = ReadServiceHealth(200, []byte(`{"service":{"namespace":"default","name":"web"},"localEndpoints":1}`+"\n"), "default", "web")
	if failing {
		t.Fatal("a node with a local backend read as failing")
	}
}
