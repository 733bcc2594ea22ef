package kube

import (
	"os"
	"path/filepath"

	"github.com/hapsuper/hapsuper/test/harness"
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

// RenderHAProxyIngress runs deploy/haproxy-ingress/post-render's
// kustomization over chartDeployment, as post-render.sh does.
func RenderHAProxyIngress(t harness.TB) Rendered {
	t.Helper()
	dir, err := os.MkdirTemp("", "hapsuper-render-")
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	src := filepath.Join(DeployDir(t), "haproxy-ingress", "post-render")
	for _, name := range []string{"kustomization.yaml", "hapsuper-patch.yaml", "hapsuper-rbac.yaml"} {
		b, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			t.Fatalf("%v", err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatalf("%v", err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "chart.yaml"), []byte(chartDeployment), 0o644); err != nil {
		t.Fatalf("%v", err)
	}
	return Render(t, dir)
}
