// Package manifests tests deploy/ as rendered by kustomize, as `kubectl
// apply -k` would send it, without a cluster: each overlay's pod spec, the
// settings hapsuper would read from it, token isolation, the haproxy-ingress
// drop-in. test/k8s applies the same rendering to a real apiserver.
package manifests_test

import (
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/hapsuper/hapsuper/test/harness/kube"
)

// deployment returns the one Deployment, typed, and its haproxy container.
func deployment(t *testing.T, r kube.Rendered) (*appsv1.Deployment, corev1.Container) {
	t.Helper()
	ds := r.Find("Deployment")
	if len(ds) != 1 {
		t.Fatalf("rendered %v: want one Deployment", r.Kinds())
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
func hapsuperEnv(c corev1.Container) func(string) (string, bool) {
	return func(name string) (string, bool) {
		if !strings.HasPrefix(name, "HAPSUPER_") {
			return "", false
		}
		return envValue(c, name)
	}
}
