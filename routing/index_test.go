package routing

import (
	"testing"

	"github.com/hapsuper/hapsuper/drain"
)

// A slice event re-judges its Service from that Service's slices alone:
// a slice that moves to another Service leaves the first one's judgement,
// a deleted one leaves it too, and the index holds no empty Service.
func TestSliceIndexByService(t *testing.T) {
	o := newTestObserver(t, Config{Mode: ModeEndpointSlices}, nil)
	o.apply(service("web"), service("api"),
		v4("web-a", "web", mine(servingTermC)),
		v4("web-b", "web", peer("n2", readyC)),
		v4("api-a", "api", peer("n2", readyC)))
	expect(t, o.Routing(o.clk.Now()), drain.RoutingWithdrawn, "default/web (IPv4)")

	// web-b moves to api: web's pod is serving-terminating with no other
	// ready endpoint, and kube-proxy falls back to it.
	o.apply(v4("web-b", "api", peer("n2", readyC)))
	expect(t, o.Routing(o.clk.Now()), drain.RoutingPending, "no other ready IPv4 endpoint")
	o.mu.Lock()
	if n := len(o.watch.byService["web"]); n != 1 {
		t.Errorf("web has %d slices in the index, want 1 (web-a)", n)
	}
	if n := len(o.watch.byService["api"]); n != 2 {
		t.Errorf("api has %d slices in the index, want 2", n)
	}
	o.mu.Unlock()

	o.apply(v4("web-c", "web", peer("n3", readyC)))
	expect(t, o.Routing(o.clk.Now()), drain.RoutingWithdrawn, "default/web (IPv4)")
	o.remove(v4("web-c", "web"))
	expect(t, o.Routing(o.clk.Now()), drain.RoutingPending, "no other ready IPv4 endpoint")

	o.remove(v4("api-a", "api"), v4("web-b", "api"))
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, ok := o.watch.byService["api"]; ok || len(o.watch.slices) != 1 {
		t.Errorf("after deleting api's slices: index %v, slices %d; want no api entry and 1 slice", o.watch.byService, len(o.watch.slices))
	}
}
