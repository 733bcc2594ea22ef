package kube

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"

	"github.com/hapsuper/hapsuper/test/harness"
	"github.com/hapsuper/hapsuper/test/k8s/k8stest"
)

// fieldManager names the harness's server-side applies.
const fieldManager = "hapsuper-deploy-test"

// Applier server-side applies rendered objects, as `kubectl apply
// --server-side` does: the apiserver validates every field against its
// schema and runs admission, RBAC's escalation check included.
type Applier struct {
	dyn    dynamic.Interface
	mapper meta.RESTMapper
}

// NewApplier returns an Applier with h's admin credentials.
func NewApplier(t harness.TB, h *k8stest.Harness) Applier {
	t.Helper()
	dyn, err := dynamic.NewForConfig(h.Config)
	if err != nil {
		t.Fatalf("make dynamic client: %v", err)
	}
	groups, err := restmapper.GetAPIGroupResources(h.Client.Discovery())
	if err != nil {
		t.Fatalf("discover the apiserver's resources: %v", err)
	}
	return Applier{dyn: dyn, mapper: restmapper.NewDiscoveryRESTMapper(groups)}
}

// Apply applies obj; dryRun asks the apiserver to do everything but store it.
func (a Applier) Apply(ctx context.Context, obj *unstructured.Unstructured, dryRun bool) error {
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

// rbacKinds are the kinds ApplyRBAC applies.
var rbacKinds = map[string]bool{"ServiceAccount": true, "Role": true, "RoleBinding": true, "ClusterRole": true, "ClusterRoleBinding": true}

// ApplyRBAC applies the ServiceAccount and RBAC objects of r and returns
// their "Kind/name".
func (a Applier) ApplyRBAC(ctx context.Context, r Rendered) ([]string, error) {
	var applied []string
	for _, obj := range r.Objects {
		if rbacKinds[obj.GetKind()] {
			if err := a.Apply(ctx, obj, false); err != nil {
				return applied, err
			}
			applied = append(applied, obj.GetKind()+"/"+obj.GetName())
		}
	}
	return applied, nil
}
