package k8s_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/hapsuper/hapsuper/test/k8s/k8stest"
)

// A pod reaches the apiserver. Freezing kube-proxy silences its healthz; thawing brings it back. Stopping
// it refuses healthz; starting it again makes it healthy.
func TestHarness_KubeProxyLifecycle(t *testing.T) {
	h := k8stest.Start(t, k8stest.Options{Nodes: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	n := h.Node(1)
	kp := n.KubeProxy

	// Pods reach the apiserver (and through it, later tests' watches).
	pod := h.AddPod(t, 1, "client", nil)
	conn, err := pod.DialContext(ctx, "tcp", h.APIServer().String())
	if err != nil {
		t.Fatalf("connect from pod to the apiserver: %v", err)
	}
	conn.Close()

	if err := kp.Freeze(); err != nil {
		t.Fatal(err)
	}
	if hz, err := n.Healthz(ctx); err == nil {
		t.Fatalf("frozen kube-proxy answered healthz: %+v", hz)
	}
	if err := kp.Thaw(); err != nil {
		t.Fatal(err)
	}
	if hz, err := n.Healthz(ctx); err != nil || hz.StatusCode != http.StatusOK {
		t.Fatalf("thawed kube-proxy: healthz %+v, %v; want 200", hz, err)
	}

	if err := kp.Stop(); err != nil {
		t.Fatal(err)
	}
	if hz, err := n.Healthz(ctx); err == nil {
		t.Fatalf("stopped kube-proxy answered healthz: %+v", hz)
	}
	began := time.Now()
	if err := kp.Start(); err != nil {
		t.Fatal(err)
	}
	if err := kp.WaitHealthy(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("restarted kube-proxy healthy in %v", time.Since(began).Round(time.Millisecond))
}
