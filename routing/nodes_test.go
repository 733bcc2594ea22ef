package routing

import (
	"fmt"
	"testing"
	"time"

	"github.com/hapsuper/hapsuper/drain"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// Nodes deleted, or turned NotReady, while their kube-proxy has not
// confirmed leave the set at the next list, and the verdict names them; a
// node NotReady at the first list is never asked.
func TestNodesLeaveTheSet(t *testing.T) {
	s := newLateScenario(t, Config{}, "n2", "n3", "n4", "n5")
	for _, n := range []string{"n2", "n3", "n4", "n5"} {
		s.syncsAt(n, -5*time.Second, 30*ms)
	}
	s.proxies["n3"].set(func(p *fakeProxy) { p.hang = true })
	s.proxies["n4"].set(func(p *fakeProxy) { p.hang = true })
	notReady := node("n5", "10.0.0.5")
	notReady.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown}}
	if _, err := s.client.CoreV1().Nodes().Update(s.t.Context(), notReady, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	got := s.round(2 * time.Second)
	expect(t, got, drain.RoutingPending, "of 3 nodes", "n3: healthz", "n4: healthz", "1 nodes left the set: n5 NotReady (Unknown)")
	if n := s.proxies["n5"].requests; n != 0 {
		t.Errorf("the NotReady node was asked %d times", n)
	}

	if err := s.client.CoreV1().Nodes().Delete(s.t.Context(), "n3", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	n4 := node("n4", "10.0.0.4")
	n4.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse}}
	if _, err := s.client.CoreV1().Nodes().Update(s.t.Context(), n4, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Read again only nodeRelist after the last list.
	if got := s.round(2*time.Second + nodeRelist - 100*ms); got.State != drain.RoutingPending {
		t.Fatalf("before the relist: %s (%s), want pending", got.State, got.Detail())
	}
	from := 2*time.Second + nodeRelist + 100*ms
	if off := s.firstWithdrawn(from, from+3*time.Second, 250*ms); off < 0 {
		t.Fatalf("not withdrawn once n3 and n4 left: %s", s.Routing(s.clk.Now()).Detail())
	}
	expect(t, s.Routing(s.clk.Now()), drain.RoutingWithdrawn, "confirmed by kube-proxy on 1 nodes", "3 nodes left the set: n3 deleted; n4 NotReady (False); n5 NotReady (Unknown)")
}

// The node list is read in pages.
func TestNodesListedInPages(t *testing.T) {
	client := fake.NewClientset()
	var limits []int64
	client.PrependReactor("list", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		limits = append(limits, a.(k8stesting.ListActionImpl).ListOptions.Limit)
		return false, nil, nil
	})
	for i := range 3 {
		if err := client.Tracker().Add(node(fmt.Sprintf("n%d", i), fmt.Sprintf("10.0.0.%d", i+2))); err != nil {
			t.Fatal(err)
		}
	}
	o := newTestObserver(t, Config{Mode: ModeKubeProxy}, client)
	if !o.listNodes(t.Context()) {
		t.Fatal("node list failed")
	}
	if len(o.nodes) != 3 {
		t.Errorf("%d nodes in the set, want 3", len(o.nodes))
	}
	if len(limits) != 1 || limits[0] != nodePageSize {
		t.Errorf("list limits %v, want one request with limit %d", limits, nodePageSize)
	}
}

// Once a node confirmed, its healthz connection is closed: the transport
// would keep it idle until exit.
func TestConfirmedNodeConnectionClosed(t *testing.T) {
	s := newScenario(t, Config{})
	s.syncsAt("n2", -5*time.Second, 30*ms)
	if got := s.round(100 * ms); got.State != drain.RoutingPending {
		t.Fatalf("first round: %s (%s)", got.State, got.Detail())
	}
	// In use (tracked) or parked between two polls.
	open := func(addr string) int {
		n := s.conns.open(addr)
		s.http.idle.mu.Lock()
		if kc, ok := s.http.idle.idle[addr]; ok && kc.parked() {
			n++
		}
		s.http.idle.mu.Unlock()
		return n
	}
	if n := open("10.0.0.2:10256"); n != 1 {
		t.Fatalf("%d connections open to a pending node, want 1 (kept alive for the next round)", n)
	}
	if off := s.firstWithdrawn(150*ms, 3*time.Second, 50*ms); off < 0 {
		t.Fatal("never confirmed")
	}
	if n := open("10.0.0.2:10256"); n != 0 {
		t.Errorf("%d connections open to a confirmed node, want 0", n)
	}
}
