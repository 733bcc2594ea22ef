package main

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"

	"github.com/hapsuper/hapsuper/test/k8s/k8stest"
)

// env is one cluster prepared for the benchmark: the harness, the hapsuper
// binary, a kubeconfig of the hapsuper ServiceAccount bound to
// deploy/overlays/kube-proxy's RBAC, and the Service under test.
type env struct {
	h          *k8stest.Harness
	root       string // module root
	bin        string // hapsuper binary
	dir        string // pods' files
	kubeconfig string
	clusterIP  netip.Addr
}

// Service ports: HTTP/1.1 on 80 → 8080, h2c (prior knowledge) on 81 → 8081.
const (
	serviceName = "web"
	httpPort    = 80
	h2Port      = 81
)

// newEnv starts the cluster, applies the RBAC, writes the kubeconfig and
// creates the Service. Harness failures end the run through tb.
func newEnv(ctx context.Context, tb *runner, nodes int, root, bin, dir string) (*env, error) {
	h := k8stest.Start(tb.t, k8stest.Options{Nodes: nodes, ProxyMode: "nftables", MinSyncPeriod: time.Second})
	e := &env{h: h, root: root, bin: bin, dir: dir, kubeconfig: filepath.Join(dir, "hapsuper.kubeconfig")}
	if err := e.applyRBAC(ctx); err != nil {
		return nil, err
	}
	if err := e.writeKubeconfig(ctx); err != nil {
		return nil, err
	}
	svc, err := h.Client.CoreV1().Services(k8stest.PodNamespace).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: serviceName},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: map[string]string{"app": serviceName},
			Ports: []corev1.ServicePort{
				{Name: "http", Port: httpPort, TargetPort: intstr.FromInt32(8080)},
				{Name: "h2", Port: h2Port, TargetPort: intstr.FromInt32(8081)},
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("create Service %s: %w", serviceName, err)
	}
	if e.clusterIP, err = netip.ParseAddr(svc.Spec.ClusterIP); err != nil {
		return nil, fmt.Errorf("read ClusterIP of Service %s: %w", serviceName, err)
	}
	return e, nil
}

// rbacFiles are the grants of routing mode kube-proxy, as deploy/ ships them.
var rbacFiles = []string{"deploy/overlays/endpointslices/rbac.yaml", "deploy/overlays/kube-proxy/nodes-rbac.yaml"}

// applyRBAC creates deploy/'s ServiceAccount, Role(Binding) and
// ClusterRole(Binding) in the pods' namespace.
func (e *env) applyRBAC(ctx context.Context) error {
	ns := k8stest.PodNamespace
	c := e.h.Client
	for _, file := range rbacFiles {
		data, err := os.ReadFile(filepath.Join(e.root, file))
		if err != nil {
			return fmt.Errorf("read RBAC manifest: %w", err)
		}
		for _, doc := range bytes.Split(data, []byte("\n---")) {
			if len(bytes.TrimSpace(doc)) == 0 {
				continue
			}
			obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(doc, nil, nil)
			if err != nil {
				return fmt.Errorf("decode %s: %w", file, err)
			}
			switch o := obj.(type) {
			case *corev1.ServiceAccount:
				o.Namespace = ns
				_, err = c.CoreV1().ServiceAccounts(ns).Create(ctx, o, metav1.CreateOptions{})
			case *rbacv1.Role:
				o.Namespace = ns
				_, err = c.RbacV1().Roles(ns).Create(ctx, o, metav1.CreateOptions{})
			case *rbacv1.RoleBinding:
				o.Namespace = ns
				for i := range o.Subjects {
					o.Subjects[i].Namespace = ns
				}
				_, err = c.RbacV1().RoleBindings(ns).Create(ctx, o, metav1.CreateOptions{})
			case *rbacv1.ClusterRole:
				_, err = c.RbacV1().ClusterRoles().Create(ctx, o, metav1.CreateOptions{})
			case *rbacv1.ClusterRoleBinding:
				for i := range o.Subjects {
					o.Subjects[i].Namespace = ns
				}
				_, err = c.RbacV1().ClusterRoleBindings().Create(ctx, o, metav1.CreateOptions{})
			default:
				return fmt.Errorf("apply %s: unexpected kind %T", file, obj)
			}
			if err != nil {
				return fmt.Errorf("apply %s: %w", file, err)
			}
		}
	}
	return nil
}

// writeKubeconfig requests a token of ServiceAccount hapsuper and writes a
// kubeconfig with it, then waits (bounded) until the grants apply.
func (e *env) writeKubeconfig(ctx context.Context) error {
	ns := k8stest.PodNamespace
	tr, err := e.h.Client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "hapsuper",
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](7200)}},
		metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("request a token for ServiceAccount hapsuper: %w", err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["bench"] = &clientcmdapi.Cluster{Server: "https://" + e.h.APIServer().String(), CertificateAuthorityData: e.h.Config.CAData}
	cfg.AuthInfos["hapsuper"] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	cfg.Contexts["hapsuper"] = &clientcmdapi.Context{Cluster: "bench", AuthInfo: "hapsuper", Namespace: ns}
	cfg.CurrentContext = "hapsuper"
	if err := clientcmd.WriteToFile(*cfg, e.kubeconfig); err != nil {
		return fmt.Errorf("write kubeconfig: %w", err)
	}
	rc, err := clientcmd.BuildConfigFromFlags("", e.kubeconfig)
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
