package k8s_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/hapsuper/hapsuper/conf"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// chartDeployment is the controller Deployment that the haproxy-ingress
// chart renders with deploy/haproxy-ingress/values.yaml (release
// "haproxy-ingress"), transcribed from the chart's
// templates/_podtemplate.yaml (haproxy-ingress/charts, controller.haproxy
// .enabled: true). Helm itself is not run here: if the chart changes the
// HAProxy container's name, arguments or volumes, this copy must follow.
const chartDeployment = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: haproxy-ingress
  labels:
    app.kubernetes.io/name: haproxy-ingress
    app.kubernetes.io/instance: haproxy-ingress
spec:
  selector:
    matchLabels:
      app.kubernetes.io/name: haproxy-ingress
      app.kubernetes.io/instance: haproxy-ingress
  template:
    metadata:
      labels:
        app.kubernetes.io/name: haproxy-ingress
        app.kubernetes.io/instance: haproxy-ingress
    spec:
      serviceAccountName: haproxy-ingress
      initContainers:
        - name: haproxy-ingress-init
          image: quay.io/jcmoraisjr/haproxy-ingress:v0.14.12
          args: ["--init"]
          volumeMounts:
            - {mountPath: /etc/haproxy, name: etc}
      containers:
        - name: haproxy-ingress
          image: quay.io/jcmoraisjr/haproxy-ingress:v0.14.12
          args:
            - --configmap=ingress-controller/haproxy-ingress
            - --ingress-class=haproxy
            - --master-socket=/var/run/haproxy/master.sock
            - --sort-backends
          env:
            - name: POD_NAME
              valueFrom: {fieldRef: {fieldPath: metadata.name}}
            - name: POD_NAMESPACE
              valueFrom: {fieldRef: {fieldPath: metadata.namespace}}
          volumeMounts:
            - {mountPath: /etc/haproxy, name: etc}
            - {mountPath: /var/lib/haproxy, name: lib}
            - {mountPath: /var/run/haproxy, name: run}
        - name: haproxy
          image: registry.example/hapsuper-haproxy:replace-me
          args: ["-W", "-S", "/var/run/haproxy/master.sock,mode,600", "-f", "/etc/haproxy"]
          ports:
            - {name: http, containerPort: 80}
            - {name: https, containerPort: 443}
            - {name: healthz, containerPort: 10253}
          livenessProbe:
            httpGet: {path: /healthz, port: 10253, scheme: HTTP}
          readinessProbe:
            httpGet: {path: /healthz, port: 10253, scheme: HTTP}
          volumeMounts:
            - {mountPath: /etc/haproxy, name: etc}
            - {mountPath: /var/lib/haproxy, name: lib}
            - {mountPath: /var/run/haproxy, name: run}
          securityContext:
            runAsUser: 0
      volumes:
        - {name: etc, emptyDir: {}}
        - {name: lib, emptyDir: {}}
        - {name: run, emptyDir: {}}
      terminationGracePeriodSeconds: 60
      dnsPolicy: ClusterFirst
      hostNetwork: false
`

// renderHAProxyIngress runs deploy/haproxy-ingress/post-render's
// kustomization over chartDeployment, as post-render.sh does.
func renderHAProxyIngress(t *testing.T) rendered {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join(deployDir, "haproxy-ingress", "post-render")
	for _, name := range []string{"kustomization.yaml", "hapsuper-patch.yaml"} {
		b, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "chart.yaml"), []byte(chartDeployment), 0o644); err != nil {
		t.Fatal(err)
	}
	return render(t, dir)
}

// The post-renderer gives the chart's HAProxy container hapsuper's
// settings (grace period equal to the pod's and to values.yaml), the pod's
// identity and a directory for its sockets, and leaves the chart's
// arguments alone; hapsuper, started by the image's ENTRYPOINT with those
// arguments, reuses the chart's master socket. The controller container is
// not touched.
func TestDeploy_HAProxyIngress(t *testing.T) {
	r := renderHAProxyIngress(t)
	d, c := r.deployment(t)

	grace, _ := envValue(c, "HAPSUPER_GRACE_PERIOD")
	g, err := time.ParseDuration(grace)
	tgps := ptrValue(d.Spec.Template.Spec.TerminationGracePeriodSeconds)
	if err != nil || tgps != int64(g/time.Second) {
		t.Errorf("HAPSUPER_GRACE_PERIOD %q, terminationGracePeriodSeconds %v: want the same", grace, tgps)
	}
	var values struct {
		Controller struct {
			TerminationGracePeriodSeconds int64 `json:"terminationGracePeriodSeconds"`
		} `json:"controller"`
	}
	b, err := os.ReadFile(filepath.Join(deployDir, "haproxy-ingress", "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &values); err != nil {
		t.Fatalf("parse values.yaml: %v", err)
	}
	if got := values.Controller.TerminationGracePeriodSeconds; time.Duration(got)*time.Second != g {
		t.Errorf("values.yaml controller.terminationGracePeriodSeconds = %d, hapsuper-patch.yaml HAPSUPER_GRACE_PERIOD = %q: want the same", got, grace)
	}
	for name, field := range map[string]string{"POD_NAME": "metadata.name", "POD_NAMESPACE": "metadata.namespace", "POD_IPS": "status.podIPs", "NODE_NAME": "spec.nodeName"} {
		if got := fieldRefs(c)[name]; got != field {
			t.Errorf("env %s from %q: want %q", name, got, field)
		}
	}
	if c.Lifecycle != nil && c.Lifecycle.PreStop != nil {
		t.Errorf("container haproxy has a preStop hook")
	}
	if !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == "/var/run/hapsuper" }) {
		t.Errorf("no volume on /var/run/hapsuper")
	}

	// The image's ENTRYPOINT is `hapsuper --`; the chart's args follow.
	s, err := conf.Parse(append([]string{"--"}, c.Args...), hapsuperEnv(c))
	if err != nil {
		t.Fatalf("hapsuper refuses the chart's HAProxy arguments with the patch's settings: %v", err)
	}
	if s.MasterSocket != "/var/run/haproxy/master.sock" {
		t.Errorf("hapsuper's master socket %q: want the chart's /var/run/haproxy/master.sock, which the controller uses", s.MasterSocket)
	}
	if s.Routing != conf.RoutingOff {
		t.Errorf("routing %q: want off", s.Routing)
	}
	for _, other := range d.Spec.Template.Spec.Containers {
		if other.Name == "haproxy-ingress" && len(other.Env) != 2 {
			t.Errorf("the controller container's env changed: %+v", other.Env)
		}
	}
}
