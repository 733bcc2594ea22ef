package kube

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/hapsuper/hapsuper/test/harness"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// RoutingOverlays are deploy/overlays' directories, by HAPSUPER_ROUTING mode.
var RoutingOverlays = []string{"off", "endpointslices", "kube-proxy"}

// Rendered is the output of one kustomization: what `kubectl apply -k`
// would send, in kubectl's (legacy) order.
type Rendered struct {
	Objects []*unstructured.Unstructured
}

// Render builds the kustomization in dir, as `kubectl kustomize dir` does.
func Render(t harness.TB, dir string) Rendered {
	t.Helper()
	opts := krusty.MakeDefaultOptions()
	opts.Reorder = krusty.ReorderOptionLegacy // kubectl's order: RBAC before workloads
	m, err := krusty.MakeKustomizer(opts).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("render kustomization %s: %v", dir, err)
	}
	var r Rendered
	for _, res := range m.Resources() {
		// Through JSON: unstructured objects hold JSON's types (int64).
		j, err := res.MarshalJSON()
		if err != nil {
			t.Fatalf("render kustomization %s: read %s: %v", dir, res.CurId(), err)
		}
		obj := &unstructured.Unstructured{}
		if err := obj.UnmarshalJSON(j); err != nil {
			t.Fatalf("render kustomization %s: decode %s: %v", dir, res.CurId(), err)
		}
		r.Objects = append(r.Objects, obj)
	}
	return r
}

// DeployDir is the repository's deploy/ directory.
func DeployDir(t harness.TB) string {
	t.Helper()
	root, err := harness.Root()
	if err != nil {
		t.Fatalf("%v", err)
	}
	return filepath.Join(root, "deploy")
}

// RenderIn renders an operator's own kustomization that takes base (a
// directory under deploy/) into namespace ns, plus extra kustomization
// lines, in which {{deploy}} stands for deploy/: how the manifests are
// meant to be consumed. Kustomize takes relative paths only.
func RenderIn(t harness.TB, base, ns, extra string) Rendered {
	t.Helper()
	dir, err := os.MkdirTemp("", "hapsuper-render-")
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	rel, err := filepath.Rel(dir, DeployDir(t))
	if err != nil {
		t.Fatalf("%v", err)
	}
	extra = strings.ReplaceAll(extra, "{{deploy}}", rel)
	k := fmt.Sprintf("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: %s\nresources:\n  - %s\n%s", ns, filepath.Join(rel, base), extra)
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatalf("%v", err)
	}
	return Render(t, dir)
}

// Find returns the objects of one kind.
func (r Rendered) Find(kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range r.Objects {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

// Kinds lists "Kind/name" of every object, in order.
func (r Rendered) Kinds() []string {
	var out []string
	for _, o := range r.Objects {
		out = append(out, o.GetKind()+"/"+o.GetName())
	}
	return out
}
