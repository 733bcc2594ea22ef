package k8s_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/hapsuper/hapsuper/drain"
	"github.com/hapsuper/hapsuper/routing"
	"github.com/hapsuper/hapsuper/routing/kube"
	"github.com/hapsuper/hapsuper/test/k8s/k8stest"
)

// kube-apiserver is restarted twice, back to back, while hapsuper watches
// a Service's EndpointSlices; then the slice withdraws the pod. client-go's
// reflector backs off on every refused connection (800 ms doubling to 30 s,
// with as much again of jitter, reset only after 2 minutes), so without
// help its watch could stay down for tens of seconds after the apiserver
// was back, the store still reading as synced: a drain then saw the pod
// ready long after every node had dropped it (campaign drain hs-262). The
// observer must see the withdrawal within a few seconds of the write.
func TestWatch_APIServerRestartedTwice(t *testing.T) {
	h := k8stest.Start(t, k8stest.Options{Nodes: 1})
	ctx := t.Context()
	const ns = "default"
	if _, err := h.Client.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: ns},
		Spec:       corev1.PodSpec{NodeName: "nowhere", Containers: []corev1.Container{{Name: "c", Image: "none"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Client.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	endpoint := func(ip, pod string, ready bool) discovery.Endpoint {
		return discovery.Endpoint{Addresses: []string{ip}, NodeName: ptr.To("nowhere"),
			Conditions: discovery.EndpointConditions{Ready: ptr.To(ready), Serving: ptr.To(ready), Terminating: ptr.To(!ready)},
			TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: pod}}
	}
	slice := &discovery.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "web-manual", Namespace: ns, Labels: map[string]string{
			discovery.LabelServiceName: "web", discovery.LabelManagedBy: "hapsuper-test"}},
		AddressType: discovery.AddressTypeIPv4,
		Endpoints:   []discovery.Endpoint{endpoint("10.99.0.5", "web-0", true), endpoint("10.99.0.6", "web-1", true)},
		Ports:       []discovery.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080)}},
	}
	if _, err := h.Client.DiscoveryV1().EndpointSlices(ns).Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	cfg := rest.CopyConfig(h.Config)
	cfg.WrapTransport = nil // hapsuper's own client, without the harness's dial retries
	client, err := kube.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	o, err := routing.New(routing.Config{Mode: routing.ModeEndpointSlices,
		Identity: routing.Identity{PodName: "web-0", Namespace: ns, NodeName: "nowhere", PodIPs: []string{"10.99.0.5"}}},
		client, slog.New(slog.NewTextHandler(testLog{t}, nil)))
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- o.Run(rctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("the observer did not stop within 10s")
		}
	})
	waitRouting(t, o, drain.RoutingPending, 20*time.Second)

	for i := range 2 {
		began := time.Now()
		if err := h.RestartAPIServer(ctx); err != nil {
			t.Fatal(err)
		}
		t.Logf("apiserver restart %d took %v", i+1, time.Since(began).Round(time.Millisecond))
	}
	slice.Endpoints[0] = endpoint("10.99.0.5", "web-0", false)
	if _, err := h.Client.DiscoveryV1().EndpointSlices(ns).Update(ctx, slice, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	written := time.Now()
	took := waitRouting(t, o, drain.RoutingWithdrawn, 90*time.Second)
	t.Logf("the observer saw the withdrawal %v after the write", took.Sub(written).Round(time.Millisecond))
	if d := took.Sub(written); d > 3*time.Second {
		t.Errorf("the observer saw the withdrawal %v after the write; want within 3s (measured 0.02–1.5 s; before refusals were retried in routing, 0–4.3 s)", d.Round(time.Millisecond))
	}
}

// waitRouting polls the observer until its verdict is state, bounded.
func waitRouting(t *testing.T, o *routing.Observer, state drain.RoutingState, bound time.Duration) time.Time {
	t.Helper()
	deadline := time.Now().Add(bound)
	for {
		r := o.Routing(time.Now())
		if r.State == state {
			return time.Now()
		}
		if time.Now().After(deadline) {
			t.Fatalf("routing still %s (%s) after %v, want %s", r.State, r.Detail(), bound, state)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

type testLog struct{ t *testing.T }

func (w testLog) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(string(p))
	return len(p), nil
}
