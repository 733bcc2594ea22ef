package manifests_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/hapsuper/hapsuper/conf"
	"github.com/hapsuper/hapsuper/haproxy"
	"github.com/hapsuper/hapsuper/test/harness/kube"
)

// The kubernetes-ingress chart the drop-in's values are for: a tarball of
// the chart's directory at its tag (kubernetes-ingress-1.52.1), looked for
// in $HAPSUPER_CHARTS (default /var/cache/hapsuper/charts), and Helm, run
// from $HELM or built from its module.
const (
	kubernetesIngressChart       = "haproxytech-kubernetes-ingress-chart-1.52.1.tar.gz"
	kubernetesIngressChartSHA256 = "68cfc55ba11f651c857ae94ddccf0c2654edfe8a0b154972e165d779f5cb260b"
	helmModule                   = "helm.sh/helm/v3/cmd/helm@v3.21.4"
	helmInstalled                = "/var/cache/hapsuper/bin/helm" // hack/charts.sh
	chartsDefault                = "/var/cache/hapsuper/charts"
	// kubeVersion is the cluster's version Helm renders for (the chart
	// requires 1.23 or later): the Kubernetes test/k8s runs
	// (tools/k8s/go.mod).
	kubeVersion = "1.37.2"
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
	objs := helmTemplate(t, kubernetesIngressChart, kubernetesIngressChartSHA256, "kubernetes-ingress",
		"haproxy-kubernetes-ingress", "haproxy-controller",
		filepath.Join(kube.DeployDir(t), "haproxytech-ingress", "values.yaml"))

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
	if limit := s.Budget() - s.WithdrawnQuiet(s.Routing); keepAlive <= 0 || keepAlive > limit {
		t.Errorf("ConfigMap %s timeout-http-keep-alive %v: want a positive time within %v (the stop budget %v less the withdrawn quiet period); the image's 60 s outlasts it", name, keepAlive, limit, s.Budget())
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

// helmTemplate renders the chart dir of the tarball (checked against its
// sha256) as `helm template release -n ns -f values` does.
func helmTemplate(t *testing.T, tarball, sum, dir, release, ns, values string) []*unstructured.Unstructured {
	t.Helper()
	charts := os.Getenv("HAPSUPER_CHARTS")
	if charts == "" {
		charts = chartsDefault
	}
	b, err := os.ReadFile(filepath.Join(charts, tarball))
	if err != nil {
		msg := fmt.Sprintf("no chart %s in %s (%v): put the chart's tarball there or set HAPSUPER_CHARTS", tarball, charts, err)
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	if got := sha256.Sum256(b); hex.EncodeToString(got[:]) != sum {
		t.Fatalf("chart %s has sha256 %x, want %s", tarball, got, sum)
	}
	root := t.TempDir()
	chart, err := extractChart(b, root, dir)
	if err != nil {
		t.Fatalf("extract %s: %v", tarball, err)
	}
	argv := []string{"template", release, chart, "--namespace", ns, "--kube-version", kubeVersion, "-f", values}
	var cmd *exec.Cmd
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Minute) // a first build of Helm takes minutes
	defer cancel()
	if h := helmBinary(); h != "" {
		cmd = exec.CommandContext(ctx, h, argv...)
	} else {
		cmd = exec.CommandContext(ctx, "go", append([]string{"run", helmModule}, argv...)...)
		cmd.Dir = root // outside every module: go run pkg@version
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, stderr.String())
	}
	t.Logf("rendered %s with %s", tarball, cmd.Args[0]+" "+cmd.Args[1])
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(out), 4096)
	for {
		var o map[string]any
		if err := dec.Decode(&o); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decode helm template output: %v", err)
		}
		if o != nil {
			objs = append(objs, &unstructured.Unstructured{Object: o})
		}
	}
	return objs
}

// helmBinary is $HELM, else the Helm hack/charts.sh installs, else ""
// (then the test builds it from its module).
func helmBinary() string {
	if h := os.Getenv("HELM"); h != "" {
		return h
	}
	if _, err := os.Stat(helmInstalled); err == nil {
		return helmInstalled
	}
	return ""
}

// extractChart writes the tarball's files under root and returns the
// directory named dir that holds a Chart.yaml.
func extractChart(b []byte, root, dir string) (string, error) {
	gz, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return "", err
	}
	tr := tar.NewReader(gz)
	var chart string
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", err
		}
		name := filepath.Clean(h.Name)
		if filepath.IsAbs(name) || strings.HasPrefix(name, "..") {
			return "", fmt.Errorf("entry %q outside the archive", h.Name)
		}
		p := filepath.Join(root, name)
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(p, 0o755)
		case tar.TypeReg:
			if err = os.MkdirAll(filepath.Dir(p), 0o755); err == nil {
				err = writeLimited(p, tr, 16<<20)
			}
			if filepath.Base(p) == "Chart.yaml" && filepath.Base(filepath.Dir(p)) == dir && chart == "" {
				chart = filepath.Dir(p)
			}
		}
		if err != nil {
			return "", err
		}
	}
	if chart == "" {
		return "", fmt.Errorf("no %s/Chart.yaml in it", dir)
	}
	return chart, nil
}

func writeLimited(path string, r io.Reader, limit int64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, io.LimitReader(r, limit)); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
