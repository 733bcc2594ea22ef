package routing

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hapsuper/hapsuper/drain"
	corev1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/hapsuper/hapsuper/routing/judge"
)

// eventually waits, at most 5 s, for the informers' goroutines to make
// cond true.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * ms)
	}
}

// Run against a fake API server: the watches fill the verdict, the stop
// request starts the healthz rounds on the ticker, ctx ends it all.
func TestRunWatchesAndConfirms(t *testing.T) {
	svc := service("web")
	svc.Annotations = map[string]string{"big": "annotation"}
	sl := v4("web-a", "web", mine(readyC), peer("n2", readyC))
	sl.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager"}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: "default"}}
	client := fake.NewClientset(svc, sl, pod, node("n2", "10.0.0.2"))

	o := newTestObserver(t, Config{Mode: ModeKubeProxy, PollInterval: 100 * ms}, client)
	p := &fakeProxy{clk: o.clk}
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	o.routes["10.0.0.2:10256"] = srv.Listener.Addr().String()

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- o.Run(ctx) }()
	state := func(want drain.RoutingState) func() bool {
		return func() bool { return o.Routing(o.clk.Now()).State == want }
	}
	eventually(t, "the pod's endpoint seen ready", state(drain.RoutingPending))
	expect(t, o.Routing(o.clk.Now()), drain.RoutingPending, "default/web (IPv4): endpoint ready")

	o.mu.Lock()
	kept := o.watch.slices["web-a"]
	o.mu.Unlock()
	if kept == nil || kept.labels["app"] != "" || kept.labels[judge.LabelServiceName] != "web" {
		t.Fatalf("slice not trimmed: %+v", kept)
	}

	// The pod is deleted: its endpoint turns serving-terminating.
	o.clk.Step(10 * time.Second)
	R := o.clk.Now()
	p.set(func(p *fakeProxy) { p.syncs = []time.Time{R.Add(-time.Minute), R.Add(30 * ms)} })
	g := int64(60)
	pod.DeletionGracePeriodSeconds = &g
	if _, err := client.CoreV1().Pods("default").Update(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	upd := v4("web-a", "web", mine(servingTermC), peer("n2", readyC))
	if _, err := client.DiscoveryV1().EndpointSlices("default").Update(ctx, upd, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the withdrawal in the API", func() bool {
		return o.Routing(o.clk.Now()).Detail() != "" && o.apiWithdrawnLocked()
	})
	eventually(t, "the pod's grace period", func() bool { d, ok := o.PodGracePeriod(); return ok && d == time.Minute })

	// The stop request starts a round at once: the sync at R+30 ms is
	// ambiguous. The ticker's rounds 2 s and 2.3 s later confirm it (two
	// quick answers D apart).
	o.clk.Step(50 * ms)
	o.StopRequested(o.clk.Now())
	eventually(t, "the first healthz round", func() bool {
		// The answer, not only the request: the round records it after.
		return strings.Contains(o.Routing(o.clk.Now()).Detail(), "IPv4:")
	})
	expect(t, o.Routing(o.clk.Now()), drain.RoutingPending, "last sync may predate the change")
	o.clk.Step(2 * time.Second)
	eventually(t, "a round after 2 s", func() bool {
		// Its answer recorded, so the next step cannot fall inside it.
		o.mu.Lock()
		defer o.mu.Unlock()
		return o.nodes["n2"].Silent(discovery.AddressTypeIPv4) > 0
	})
	o.clk.Step(300 * ms)
	eventually(t, "kube-proxy's confirmation", state(drain.RoutingWithdrawn))

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run = %v, want nil", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after ctx ended")
	}
}

// Before the first list arrives the verdict says so; ctx ends Run even
// while it waits for the caches.
func TestRunNotSynced(t *testing.T) {
	o := newTestObserver(t, Config{Mode: ModeEndpointSlices}, fake.NewClientset())
	expect(t, o.Routing(o.clk.Now()), drain.RoutingUnverified, "watch not synced")
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := o.Run(ctx); err != nil {
		t.Fatalf("Run = %v", err)
	}
}

func (to *testObserver) apiWithdrawnLocked() bool {
	to.mu.Lock()
	defer to.mu.Unlock()
	return judge.APIWithdrawn(to.watch.paths)
}
