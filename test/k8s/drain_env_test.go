package k8s_test

// The drain suite (drain_*_test.go) runs the built hapsuper binary, with
// real HAProxy, inside pod network namespaces of a k8stest cluster, with the
// credentials of a ServiceAccount bound to deploy/overlays/kube-proxy's RBAC,
// and plays the kubelet around it: Ready, delete, SIGTERM, and removal once
// hapsuper has exited. This file makes that environment.

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/hapsuper/hapsuper/test/harness/kube"
	"github.com/hapsuper/hapsuper/test/k8s/k8stest"
)

// The drain timings every scenario uses: a 12 s grace period leaves a stop
// budget of 10 s (default margin 2 s) and a bound of two thirds of it.
const (
	drainGrace = 12 * time.Second
	drainBound = (drainGrace - 2*time.Second) * 2 / 3 // (grace − default margin) · 2/3 ≈ 6.67 s
	drainQuiet = time.Second
)

// drainEnv is one cluster prepared for hapsuper pods (kube.Env: the
// kube-proxy overlay's RBAC, rendered, and a kubeconfig of its
// ServiceAccount).
type drainEnv struct {
	*kube.Env
}

func newDrainEnv(t *testing.T, opts k8stest.Options) *drainEnv {
	t.Helper()
	return &drainEnv{kube.NewEnv(t, opts)}
}

// service creates a ClusterIP Service port 80 → 8080 selecting app=<name>
// and returns its URL; localTraffic sets internalTrafficPolicy Local.
func (e *drainEnv) service(t *testing.T, name string, localTraffic bool) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ip, err := e.Service(ctx, name, localTraffic, corev1.ServicePort{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)})
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("http://%s/", netip.AddrPortFrom(ip, 80))
}

// nft runs an nftables script inside node i's network namespace.
func (e *drainEnv) nft(t *testing.T, i int, script string) {
	t.Helper()
	if err := e.H.Node(i).NFT(script); err != nil {
		t.Fatal(err)
	}
}

// waitRouted waits (bounded) until node i's requests to url reach every
// pod of want[i].
func (e *drainEnv) waitRouted(t *testing.T, url string, want map[int][]string) {
	t.Helper()
	for i, pods := range want {
		waitSeen(t, e.H.Node(i), url, 10*time.Second, pods...)
	}
}

// startPlainPod adds a Ready pod on node whose Go server answers its name
// on :8080: a replica that is not drained in the scenario.
func (e *drainEnv) startPlainPod(t *testing.T, node int, name, app string) *k8stest.Pod {
	t.Helper()
	p := e.H.AddPod(t, node, name, map[string]string{"app": app})
	p.ServeHTTP(t, 8080, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.H.SetPodReady(ctx, p, true); err != nil {
		t.Fatal(err)
	}
	return p
}

// drainEvent returns the note of the DrainEnded Event hapsuper posted on
// pod, if any.
func (e *drainEnv) drainEvent(t *testing.T, pod string) (string, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	list, err := e.H.Client.EventsV1().Events(k8stest.PodNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list Events: %v", err)
	}
	for _, ev := range list.Items {
		if ev.Reason == "DrainEnded" && ev.Regarding.Name == pod {
			return ev.Note, true
		}
	}
	return "", false
}
