package kube

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"

	"github.com/hapsuper/hapsuper/test/harness"
	"github.com/hapsuper/hapsuper/test/k8s/k8stest"
)

// Env is one k8stest cluster prepared for hapsuper pods: the binary, a
// directory for the pods' files, and a kubeconfig holding a token of
// ServiceAccount hapsuper bound to the rendered deploy/overlays/kube-proxy
// RBAC.
type Env struct {
	H          *k8stest.Harness
	Bin        string // the hapsuper binary
	Dir        string // pods' configs, sockets and the kubeconfig
	Kubeconfig string // ServiceAccount hapsuper's token, CA, apiserver address
}

// NewBareEnv builds hapsuper (once per process), starts a cluster and
// makes the pods' directory, removed at the test's end: an Env without
// RBAC or kubeconfig, for pods whose chart brings its own.
func NewBareEnv(t harness.TB, opts k8stest.Options) *Env {
	t.Helper()
	bin, err := harness.Binary()
	if err != nil {
		t.Fatalf("%v", err)
	}
	h := k8stest.Start(t, opts)
	// Named like the cluster harness's directories, so that a later run
	// removes it when this one crashed.
	dir, err := os.MkdirTemp("", fmt.Sprintf("hapsuper-k8s-%d-drain-", os.Getpid()))
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return &Env{H: h, Bin: bin, Dir: dir}
}

// NewEnv builds hapsuper (once per process), starts a cluster, applies the
// kube-proxy overlay's RBAC, rendered into the pods' namespace, and writes
// a kubeconfig holding a token of its ServiceAccount (TokenRequest API),
// checked to list what hapsuper lists.
func NewEnv(t harness.TB, opts k8stest.Options) *Env {
	t.Helper()
	e := NewBareEnv(t, opts)
	e.Kubeconfig = filepath.Join(e.Dir, "hapsuper.kubeconfig")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := NewApplier(t, e.H).ApplyRBAC(ctx, RenderIn(t, "overlays/kube-proxy", k8stest.PodNamespace, "")); err != nil {
		t.Fatalf("%v", err)
	}
	if err := e.writeKubeconfig(ctx); err != nil {
		t.Fatalf("%v", err)
	}
	return e
}

// writeKubeconfig requests a token of ServiceAccount hapsuper, writes a
// kubeconfig with it, then waits (bounded) until the token may list what
// hapsuper lists: the bindings reach the RBAC authorizer a few milliseconds
// after the apply.
func (e *Env) writeKubeconfig(ctx context.Context) error {
	ns := k8stest.PodNamespace
	tr, err := e.H.Client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "hapsuper",
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](7200)}},
		metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("request a token for ServiceAccount hapsuper: %w", err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["k8stest"] = &clientcmdapi.Cluster{Server: "https://" + e.H.APIServer().String(), CertificateAuthorityData: e.H.Config.CAData}
	cfg.AuthInfos["hapsuper"] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	cfg.Contexts["hapsuper"] = &clientcmdapi.Context{Cluster: "k8stest", AuthInfo: "hapsuper", Namespace: ns}
	cfg.CurrentContext = "hapsuper"
	if err := clientcmd.WriteToFile(*cfg, e.Kubeconfig); err != nil {
		return fmt.Errorf("write kubeconfig: %w", err)
	}
	rc, err := clientcmd.BuildConfigFromFlags("", e.Kubeconfig)
	if err != nil {
		return fmt.Errorf("read kubeconfig back: %w", err)
	}
	c, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return fmt.Errorf("build client: %w", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err1 := c.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{Limit: 1})
		_, err2 := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{Limit: 1})
		if err1 == nil && err2 == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("ServiceAccount hapsuper still cannot list after 10s: endpointslices: %v; nodes: %v", err1, err2)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Service creates a ClusterIP Service selecting app=name with ports and
// returns its address; localTraffic sets internalTrafficPolicy Local.
func (e *Env) Service(ctx context.Context, name string, localTraffic bool, ports ...corev1.ServicePort) (netip.Addr, error) {
	spec := corev1.ServiceSpec{
		Type:     corev1.ServiceTypeClusterIP,
		Selector: map[string]string{"app": name},
		Ports:    ports,
	}
	if localTraffic {
		spec.InternalTrafficPolicy = ptr.To(corev1.ServiceInternalTrafficPolicyLocal)
	}
	svc, err := e.H.Client.CoreV1().Services(k8stest.PodNamespace).Create(ctx,
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}, metav1.CreateOptions{})
	if err != nil {
		return netip.Addr{}, fmt.Errorf("create Service %s: %w", name, err)
	}
	ip, err := netip.ParseAddr(svc.Spec.ClusterIP)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("ClusterIP of Service %s %q: %w", name, svc.Spec.ClusterIP, err)
	}
	return ip, nil
}
