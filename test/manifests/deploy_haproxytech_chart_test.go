package manifests_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/hapsuper/hapsuper/conf"
	"github.com/hapsuper/hapsuper/haproxy"
	"github.com/hapsuper/hapsuper/test/harness/kube"
)

// The values, rendered by Helm with the real chart, give the controller
// what a drain needs: its ConfigMap (the one its --configmap names) puts
// option idle-close-on-response in its http and https frontends, timeout
// client-fin, and a keep-alive timeout inside the stop budget; hapsuper's
// environment ignores the probe and stats frontends that the controller
// generates. The controller's configuration for that ConfigMap (written
// through its config parser, snippet markers included) then inspects
// without a warning. docs/haproxytech.md says what the chart mounts at
// /run and the drain's bound with these settings.
func TestDeploy_HAProxyTechChart(t *testing.T) {
	objs := kube.RenderHAProxyTechIn(t, "haproxy-controller").Objects

	d := renderedDeployment(t, objs)
	if n := len(d.Spec.Template.Spec.Containers); n != 1 {
		t.Fatalf("Deployment %s has %d containers: want the one of HAProxy and the controller", d.Name, n)
	}
	c := d.Spec.Template.Spec.Containers[0]
	s, err := conf.Parse(nil, hapsuperEnv(c))
	if err != nil {
		t.Fatalf("hapsuper refuses the rendered container's settings: %v", err)
	}

	// The controller's ConfigMap, as its --configmap names it.
	var name string
	for _, a := range c.Args {
		if v, ok := strings.CutPrefix(a, "--configmap="); ok {
			name = v
		}
	}
	data := configMapData(t, objs, name)
	if !slices.Contains(strings.Split(data["frontend-config-snippet"], "\n"), "option idle-close-on-response") {
		t.Errorf("ConfigMap %s frontend-config-snippet %q: want the line `option idle-close-on-response`, or idle kept-alive clients keep every drain to its bound", name, data["frontend-config-snippet"])
	}
	if d := configTime(t, data, "timeout-client-fin"); d <= 0 {
		t.Errorf("ConfigMap %s timeout-client-fin %v: want a positive time, or HTTP/2 connections stay open after the soft stop", name, d)
	}
	keepAlive := configTime(t, data, "timeout-http-keep-alive")
	limit := s.Budget() - s.WithdrawnQuiet(s.Routing)
	if keepAlive <= 0 || keepAlive > limit {
		t.Errorf("ConfigMap %s timeout-http-keep-alive %v: want a positive time within %v (the stop budget %v less the withdrawn quiet period); the image's 60 s outlasts it", name, keepAlive, limit, s.Budget())
	}
	// HAProxy 3.2 and 3.4 keep an HTTP/2 connection that its client holds
	// idle after the soft stop's GOAWAY for timeout client (test/k8s's
	// TestHAProxyTech_RealController measured the image's 50 s): no longer
	// than the keep-alive, so that the pod ends with its last client.
	if client := configTime(t, data, "timeout-client"); client <= 0 || client > keepAlive {
		t.Errorf("ConfigMap %s timeout-client %v: want a positive time within the keep-alive %v; the image's 50 s keeps every pod that long after its last request", name, client, keepAlive)
	}

	// What the controller writes for that ConfigMap (haproxy/testdata, made
	// with the controller's config parser from its base configuration):
	// its frontends, among them the ignored ones, and no warning.
	cfg := filepath.Join(filepath.Dir(kube.DeployDir(t)), "haproxy", "testdata", "haproxytech-snippets.cfg")
	for _, fe := range []string{"healthz", "stats"} {
		if !slices.Contains(s.IgnoreFrontends, fe) {
			t.Errorf("HAPSUPER_IGNORE_FRONTENDS %q: want %s, the controller's probe and stats frontend, whose requests would count as traffic", s.IgnoreFrontends, fe)
		}
	}
	in, err := haproxy.Inspect([]string{cfg}, s)
	if err != nil {
		t.Fatalf("inspect the controller's configuration with the rendered settings: %v", err)
	}
	if len(in.Warnings) > 0 {
		t.Errorf("the controller's configuration for these values warns:\n%s", strings.Join(in.Warnings, "\n"))
	}
	for _, fe := range in.Frontends {
		if (fe.Name == "http" || fe.Name == "https") && (!fe.Graceful || fe.IdleBound != keepAlive) {
			t.Errorf("frontend %+v: want graceful, idle bound %v (the ConfigMap's keep-alive)", fe, keepAlive)
		}
	}

	// The chart mounts an emptyDir at /run, which hides the image's
	// /var/run/hapsuper; the docs say so, and give the drain's bound.
	if v, ok := mountedVolume(d, c, "/run"); !ok || v.EmptyDir == nil {
		t.Errorf("the chart mounts %+v at /run: docs/haproxytech.md says an emptyDir", v)
	}
	doc, err := os.ReadFile(filepath.Join(filepath.Dir(kube.DeployDir(t)), "docs", "haproxytech.md"))
	if err != nil {
		t.Fatal(err)
	}
	bound := fmt.Sprintf("%.2f s", (s.MaxWait - s.CompanionKillDelay).Seconds())
	for _, want := range []string{"emptyDir", "`/run`", bound} {
		if !strings.Contains(string(doc), want) {
			t.Errorf("docs/haproxytech.md does not say %q (the chart's /run, the bound --max-wait − --companion-kill-delay)", want)
		}
	}
}

// configTime reads a time of the controller's ConfigMap (a number and a
// unit, as the controller's utils.ParseTime takes).
func configTime(t *testing.T, data map[string]string, key string) time.Duration {
	t.Helper()
	d, err := time.ParseDuration(data[key])
	if err != nil {
		t.Errorf("ConfigMap %s %q: %v: want a time with a unit, such as 5s", key, data[key], err)
	}
	return d
}

func renderedDeployment(t *testing.T, objs []*unstructured.Unstructured) *appsv1.Deployment {
	t.Helper()
	var out []*appsv1.Deployment
	for _, o := range objs {
		if o.GetKind() != "Deployment" {
			continue
		}
		var d appsv1.Deployment
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &d); err != nil {
			t.Fatalf("decode Deployment %s: %v", o.GetName(), err)
		}
		out = append(out, &d)
	}
	if len(out) != 1 {
		t.Fatalf("the chart rendered %d Deployments: want one", len(out))
	}
	return out[0]
}

// configMapData returns the data of the ConfigMap "namespace/name".
func configMapData(t *testing.T, objs []*unstructured.Unstructured, ref string) map[string]string {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == "ConfigMap" && o.GetNamespace()+"/"+o.GetName() == ref {
			data, _, err := unstructured.NestedStringMap(o.Object, "data")
			if err != nil {
				t.Fatalf("read ConfigMap %s: %v", ref, err)
			}
			return data
		}
	}
	t.Fatalf("the chart rendered no ConfigMap %q (the controller's --configmap)", ref)
	return nil
}

// mountedVolume returns the pod's volume that c mounts at path.
func mountedVolume(d *appsv1.Deployment, c corev1.Container, path string) (corev1.Volume, bool) {
	for _, m := range c.VolumeMounts {
		if m.MountPath != path {
			continue
		}
		for _, v := range d.Spec.Template.Spec.Volumes {
			if v.Name == m.Name {
				return v, true
			}
		}
	}
	return corev1.Volume{}, false
}
