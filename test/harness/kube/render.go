package k8s_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// deployDir is the repository's deploy/ directory, from this package's.
const deployDir = "../../deploy"

// routingOverlays are deploy/overlays' directories, by HAPSUPER_ROUTING mode.
var routingOverlays = []string{"off", "endpointslices", "kube-proxy"}

// rendered is the output of one kustomization: what `kubectl apply -k`
// would send, in kubectl's (legacy) order.
type rendered struct {
	Objects []*unstructured.Unstructured
}

// render builds the kustomization in dir, as `kubectl kustomize dir` does.
func render(t *testing.T, dir string) rendered {
	t.Helper()
	opts := krusty.MakeDefaultOptions()
	opts.Reorder = krusty.ReorderOptionLegacy // kubectl's order: RBAC before workloads
	m, err := krusty.MakeKustomizer(opts).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("render kustomization %s: %v", dir, err)
	}
	var r rendered
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

// renderIn renders an operator's own kustomization that takes base (a
// directory under deploy/) into namespace ns, plus extra kustomization
// lines, in which {{deploy}} stands for deploy/: how the manifests are
// meant to be consumed. Kustomize takes relative paths only.
func renderIn(t *testing.T, base, ns, extra string) rendered {
	t.Helper()
	dir := t.TempDir()
	abs, err := filepath.Abs(deployDir)
	if err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(dir, abs)
	if err != nil {
		t.Fatal(err)
	}
	extra = strings.ReplaceAll(extra, "{{deploy}}", rel)
	k := fmt.Sprintf("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: %s\nresources:\n  - %s\n%s", ns, filepath.Join(rel, base), extra)
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	return render(t, dir)
}

// find returns the objects of one kind.
func (r rendered) find(kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range r.Objects {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

// kinds lists "Kind/name" of every object, in order.
func (r rendered) kinds() []string {
	var out []string
	for _, o := range r.Objects {
		out = append(out, o.GetKind()+"/"+o.GetName())
	}
	return out
}

// deployment returns the one Deployment, typed, and its haproxy container.
func (r rendered) deployment(t *testing.T) (*appsv1.Deployment, corev1.Container) {
	t.Helper()
	ds := r.find("Deployment")
	if len(ds) != 1 {
		t.Fatalf("rendered %v: want one Deployment", r.kinds())
	}
	var d appsv1.Deployment
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(ds[0].Object, &d, true); err != nil {
		t.Fatalf("decode Deployment %s: %v", ds[0].GetName(), err)
	}
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name == "haproxy" {
			return &d, c
		}
	}
	t.Fatalf("Deployment %s has no container haproxy", d.Name)
	return nil, corev1.Container{}
}

// envValue returns the literal value of the container's variable name.
func envValue(c corev1.Container, name string) (string, bool) {
	for _, e := range c.Env {
		if e.Name == name && e.ValueFrom == nil {
			return e.Value, true
		}
	}
	return "", false
}

// fieldRefs maps the container's downward-API variables to their fields.
func fieldRefs(c corev1.Container) map[string]string {
	out := map[string]string{}
	for _, e := range c.Env {
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			out[e.Name] = e.ValueFrom.FieldRef.FieldPath
		}
	}
	return out
}

// tokenVolume returns the pod's projected volumes that carry a
// service-account token.
func tokenVolumes(d *appsv1.Deployment) []corev1.Volume {
	var out []corev1.Volume
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Projected == nil {
			continue
		}
		if slices.ContainsFunc(v.Projected.Sources, func(s corev1.VolumeProjection) bool { return s.ServiceAccountToken != nil }) {
			out = append(out, v)
		}
	}
	return out
}

// hapsuperEnv is a getenv over the container's literal HAPSUPER_* values,
// as hapsuper would see them in the pod.
func hapsuperEnv(c corev1.Container) func(string) string {
	return func(name string) string {
		if !strings.HasPrefix(name, "HAPSUPER_") {
			return ""
		}
		v, _ := envValue(c, name)
		return v
	}
}
