package k8s_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hapsuper/hapsuper/test/harness/kube"
	"github.com/hapsuper/hapsuper/test/k8s/k8stest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// createNamespace creates ns for real; the harness removes the cluster.
func createNamespace(ctx context.Context, t *testing.T, h *k8stest.Harness, ns string) {
	t.Helper()
	_, err := h.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create namespace %s: %v", ns, err)
	}
}

// Every object of every overlay, as shipped (namespace hapsuper) and as an
// operator's kustomization moves it to another namespace, passes the real
// apiserver's validation and admission in a server-side dry run.
//
// Order: a dry run stores nothing, so a RoleBinding dry-run after its
// Role's dry run does not find the Role. For this test's client
// (system:masters) RBAC's escalation check passes without reading the Role,
// and a RoleBinding may name a Role that does not exist yet, so the dry run
// of each object stands on its own. An operator without cluster-admin must
// apply for real in kubectl's order (Roles before their bindings), which
// the render keeps (kinds are logged); TestRBAC_LeastPrivilege applies the
// RBAC for real in that order.
func TestDeploy_ServerSideDryRun(t *testing.T) {
	h := k8stest.Start(t, k8stest.Options{Nodes: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	a := kube.NewApplier(t, h)

	createNamespace(ctx, t, h, "hapsuper")
	for _, mode := range kube.RoutingOverlays {
		t.Run(mode, func(t *testing.T) {
			shipped := kube.Render(t, filepath.Join(kube.DeployDir(t), "overlays", mode))
			ns := "dryrun-" + mode
			createNamespace(ctx, t, h, ns)
			moved := kube.RenderIn(t, filepath.Join("overlays", mode), ns, "")
			for _, r := range []kube.Rendered{shipped, moved} {
				for _, obj := range r.Objects {
					if err := a.Apply(ctx, obj, true); err != nil {
						t.Error(err)
					}
				}
				t.Logf("dry run accepted in kubectl's order: %s", strings.Join(r.Kinds(), " "))
			}
		})
	}
	t.Run("token-isolation", func(t *testing.T) {
		ns := "dryrun-isolated"
		createNamespace(ctx, t, h, ns)
		r := kube.RenderIn(t, "overlays/kube-proxy", ns, "components:\n  - {{deploy}}/components/token-isolation\n")
		for _, obj := range r.Objects {
			if err := a.Apply(ctx, obj, true); err != nil {
				t.Error(err)
			}
		}
	})
	t.Run("network-policy", func(t *testing.T) {
		ns := "dryrun-netpol"
		createNamespace(ctx, t, h, ns)
		r := kube.RenderIn(t, "overlays/kube-proxy", ns, "components:\n  - {{deploy}}/components/network-policy\n")
		if len(r.Find("NetworkPolicy")) != 1 {
			t.Fatalf("rendered %v: want one NetworkPolicy", r.Kinds())
		}
		for _, obj := range r.Objects {
			if err := a.Apply(ctx, obj, true); err != nil {
				t.Error(err)
			}
		}
	})
	t.Run("haproxy-ingress", func(t *testing.T) {
		ns := "ingress-controller"
		createNamespace(ctx, t, h, ns)
		for _, obj := range kube.RenderHAProxyIngress(t).Objects { // released in ns: namespaced objects name it
			if err := a.Apply(ctx, obj, true); err != nil {
				t.Error(err)
			}
		}
	})
	// The dry run does validate: a misspelt field is refused.
	t.Run("refuses an unknown field", func(t *testing.T) {
		d := kube.Render(t, filepath.Join(kube.DeployDir(t), "overlays", "off")).Find("Deployment")[0].DeepCopy()
		if err := unstructured.SetNestedField(d.Object, int64(30), "spec", "template", "spec", "terminationGracePeriodSecond"); err != nil {
			t.Fatal(err)
		}
		err := a.Apply(ctx, d, true)
		if err == nil || !strings.Contains(err.Error(), "terminationGracePeriodSecond") {
			t.Errorf("dry run of a Deployment with a misspelt field: error %v, want one naming the field", err)
		}
	})
}
