package k8stest

import (
	"net/netip"
	"testing"
)

// TestPodAddresses: every node's range holds podHosts pods after its
// gateway, inside the cluster range, without overlapping another node's.
func TestPodAddresses(t *testing.T) {
	cluster := netip.MustParsePrefix(clusterCIDR)
	seen := map[netip.Addr]int{}
	for node := 1; node <= 9; node++ {
		cidr := podCIDR(node)
		for host := 2; host <= podHosts; host++ {
			a := podAddr(cidr, host)
			if !cidr.Contains(a) || !cluster.Contains(a) {
				t.Fatalf("node %d host %d: %s outside %s or %s", node, host, a, cidr, cluster)
			}
			if other, ok := seen[a]; ok {
				t.Fatalf("node %d host %d: %s already given on node %d", node, host, a, other)
			}
			seen[a] = node
		}
		if gw := podAddr(cidr, 1); gw != cidr.Addr().Next() {
			t.Errorf("node %d: host 1 is %s, want the gateway %s", node, gw, cidr.Addr().Next())
		}
	}
	if got, want := podAddr(podCIDR(2), 300), netip.MustParseAddr("10.251.33.44"); got != want {
		t.Errorf("node 2 host 300 = %s, want %s", got, want)
	}
}
