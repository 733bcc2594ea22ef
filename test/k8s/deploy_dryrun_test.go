package k8s_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hapsuper/hapsuper/test/k8s/k8stest"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
)

// fieldManager names this test's server-side applies.
const fieldManager = "hapsuper-deploy-test"

// applier server-side applies rendered objects, as `kubectl apply
// --server-side` does: the apiserver validates every field against its
// schema and runs admission, RBAC's escalation check included.
type applier struct {
	dyn    dynamic.Interface
	mapper meta.RESTMapper
}

func newApplier(t *testing.T, h *k8stest.Harness) applier {
	t.Helper()
	dyn, err := dynamic.NewForConfig(h.Config)
	if err != nil {
		t.Fatalf("make dynamic client: %v", err)
	}
	groups, err := restmapper.GetAPIGroupResources(h.Client.Discovery())
	if err != nil {
		t.Fatalf("discover the apiserver's resources: %v", err)
	}
	return applier{dyn: dyn, mapper: restmapper.NewDiscoveryRESTMapper(groups)}
}

// apply applies obj; dryRun asks the apiserver to do everything but store it.
func (a applier) apply(ctx context.Context, obj *unstructured.Unstructured, dryRun bool) error {
	gvk := obj.GroupVersionKind()
	m, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return fmt.Errorf("map %s to a resource: %w", gvk, err)
	}
	var r dynamic.ResourceInterface = a.dyn.Resource(m.Resource)
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		if obj.GetNamespace() == "" {
			return fmt.Errorf("%s %s has no namespace: the overlay must set one", gvk.Kind, obj.GetName())
		}
		r = a.dyn.Resource(m.Resource).Namespace(obj.GetNamespace())
	}
	opts := metav1.ApplyOptions{FieldManager: fieldManager, Force: true}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	if _, err := r.Apply(ctx, obj.GetName(), obj, opts); err != nil {
		return fmt.Errorf("apply %s %s/%s (dry run %v): %w", gvk.Kind, obj.GetNamespace(), obj.GetName(), dryRun, err)
	}
	return nil
}

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
	a := newApplier(t, h)

	createNamespace(ctx, t, h, "hapsuper")
	for _, mode := range routingOverlays {
		t.Run(mode, func(t *testing.T) {
			shipped := render(t, filepath.Join(deployDir, "overlays", mode))
			ns := "dryrun-" + mode
			createNamespace(ctx, t, h, ns)
			moved := renderIn(t, filepath.Join("overlays", mode), ns, "")
			for _, r := range []rendered{shipped, moved} {
				for _, obj := range r.Objects {
					if err := a.apply(ctx, obj, true); err != nil {
						t.Error(err)
					}
				}
				t.Logf("dry run accepted in kubectl's order: %s", strings.Join(r.kinds(), " "))
			}
		})
	}
	t.Run("token-isolation", func(t *testing.T) {
		ns := "dryrun-isolated"
		createNamespace(ctx, t, h, ns)
		r := renderIn(t, "overlays/kube-proxy", ns, "components:\n  - {{deploy}}/components/token-isolation\n")
		for _, obj := range r.Objects {
			if err := a.apply(ctx, obj, true); err != nil {
				t.Error(err)
			}
		}
	})
	t.Run("haproxy-ingress", func(t *testing.T) {
		ns := "ingress-controller"
		createNamespace(ctx, t, h, ns)
		for _, obj := range renderHAProxyIngress(t).Objects {
			obj.SetNamespace(ns)
			if err := a.apply(ctx, obj, true); err != nil {
				t.Error(err)
			}
		}
	})
	// The dry run does validate: a misspelt field is refused.
	t.Run("refuses an unknown field", func(t *testing.T) {
		d := render(t, filepath.Join(deployDir, "overlays", "off")).find("Deployment")[0].DeepCopy()
		if err := unstructured.SetNestedField(d.Object, int64(30), "spec", "template", "spec", "terminationGracePeriodSecond"); err != nil {
			t.Fatal(err)
		}
		err := a.apply(ctx, d, true)
		if err == nil || !strings.Contains(err.Error(), "terminationGracePeriodSecond") {
			t.Errorf("dry run of a Deployment with a misspelt field: error %v, want one naming the field", err)
		}
	})
}
