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
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"

	"github.com/hapsuper/hapsuper/test/harness"
	"github.com/hapsuper/hapsuper/test/k8s/k8stest"
)

// The drain timings every scenario uses: a 12 s grace period leaves a stop
// budget of 10 s (default margin 2 s) and a bound of two thirds of it.
const (
	drainGrace = 12 * time.Second
	drainBound = (drainGrace - 2*time.Second) * 2 / 3 // (grace − default margin) · 2/3 ≈ 6.67 s
	drainQuiet = time.Second
)

// hapsuperBinary returns the binary built once per test process.
func hapsuperBinary(t *testing.T) string {
	t.Helper()
	bin, err := harness.Binary()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// drainEnv is one cluster prepared for hapsuper pods.
type drainEnv struct {
	h          *k8stest.Harness
	bin        string // the hapsuper binary
	dir        string // pods' configs, sockets and the kubeconfig
	kubeconfig string // ServiceAccount hapsuper's token, CA, apiserver address
}

// newDrainEnv starts a cluster, applies overlays/kube-proxy's RBAC to the
// namespace the pods live in, and writes a kubeconfig holding a token of its
// ServiceAccount (TokenRequest API), checked to list what hapsuper lists.
func newDrainEnv(t *testing.T, opts k8stest.Options) *drainEnv {
	t.Helper()
	bin := hapsuperBinary(t)
	h := k8stest.Start(t, opts)
	dir, err := os.MkdirTemp("", fmt.Sprintf("hapsuper-k8s-%d-drain-", os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	e := &drainEnv{h: h, bin: bin, dir: dir, kubeconfig: filepath.Join(dir, "hapsuper.kubeconfig")}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a := newApplier(t, h)
	for _, obj := range renderIn(t, "overlays/kube-proxy", k8stest.PodNamespace, "").Objects {
		switch obj.GetKind() {
		case "ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding":
			if err := a.apply(ctx, obj, false); err != nil {
				t.Fatal(err)
			}
		}
	}
	tr, err := h.Client.CoreV1().ServiceAccounts(k8stest.PodNamespace).CreateToken(ctx, "hapsuper",
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}},
		metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("request a token for ServiceAccount hapsuper: %v", err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["k8stest"] = &clientcmdapi.Cluster{Server: "https://" + h.APIServer().String(), CertificateAuthorityData: h.Config.CAData}
	cfg.AuthInfos["hapsuper"] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	cfg.Contexts["hapsuper"] = &clientcmdapi.Context{Cluster: "k8stest", AuthInfo: "hapsuper", Namespace: k8stest.PodNamespace}
	cfg.CurrentContext = "hapsuper"
	if err := clientcmd.WriteToFile(*cfg, e.kubeconfig); err != nil {
		t.Fatalf("write kubeconfig: %v", err)
	}
	e.waitGrants(ctx, t)
	return e
}

// waitGrants waits (bounded) until the token may list what hapsuper lists:
// the bindings reach the RBAC authorizer a few milliseconds after the apply.
func (e *drainEnv) waitGrants(ctx context.Context, t *testing.T) {
	t.Helper()
	rc, err := clientcmd.BuildConfigFromFlags("", e.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	c, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err1 := c.DiscoveryV1().EndpointSlices(k8stest.PodNamespace).List(ctx, metav1.ListOptions{Limit: 1})
		_, err2 := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{Limit: 1})
		if err1 == nil && err2 == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("ServiceAccount hapsuper still cannot list after 10s: endpointslices: %v; nodes: %v", err1, err2)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// service creates a ClusterIP Service port 80 → 8080 selecting app=<name>
// and returns its URL; localTraffic sets internalTrafficPolicy Local.
func (e *drainEnv) service(t *testing.T, name string, localTraffic bool) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	spec := corev1.ServiceSpec{
		Type:     corev1.ServiceTypeClusterIP,
		Selector: map[string]string{"app": name},
		Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}},
	}
	if localTraffic {
		spec.InternalTrafficPolicy = ptr.To(corev1.ServiceInternalTrafficPolicyLocal)
	}
	svc, err := e.h.Client.CoreV1().Services(k8stest.PodNamespace).Create(ctx,
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create Service %s: %v", name, err)
	}
	ip, err := netip.ParseAddr(svc.Spec.ClusterIP)
	if err != nil {
		t.Fatalf("ClusterIP of Service %s %q: %v", name, svc.Spec.ClusterIP, err)
	}
	return fmt.Sprintf("http://%s/", netip.AddrPortFrom(ip, 80))
}

// nft runs an nftables script inside a network namespace.
func nft(t *testing.T, netns, script string) {
	t.Helper()
	cmd := exec.Command("ip", "netns", "exec", netns, "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(script)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("nft in %s: %v: %s\n%s", netns, err, out, script)
	}
}

// waitRouted waits (bounded) until node i's requests to url reach every
// pod of want[i].
func (e *drainEnv) waitRouted(t *testing.T, url string, want map[int][]string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i, pods := range want {
		waitSeen(ctx, t, e.h.Node(i), url, pods...)
	}
}

// startPlainPod adds a Ready pod on node whose Go server answers its name
// on :8080: a replica that is not drained in the scenario.
func (e *drainEnv) startPlainPod(t *testing.T, node int, name, app string) *k8stest.Pod {
	t.Helper()
	p := e.h.AddPod(t, node, name, map[string]string{"app": app})
	p.ServeHTTP(t, 8080, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.h.SetPodReady(ctx, p, true); err != nil {
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
	list, err := e.h.Client.EventsV1().Events(k8stest.PodNamespace).List(ctx, metav1.ListOptions{})
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
