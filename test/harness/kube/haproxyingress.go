package kube

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/hapsuper/hapsuper/test/harness"
)

// HAProxyIngressChart is the haproxy-ingress chart version whose output
// chartObjects stands for, and HAProxyIngressController the controller
// version it installs (hack/haproxy-ingress.sh builds that one).
const (
	HAProxyIngressChart      = "0.16.1"
	HAProxyIngressController = "v0.16.1"
)

// HAProxyIngressRelease is the namespace of the README's helm command.
const HAProxyIngressRelease = "ingress-controller"

// chartObjects is what chart 0.16.1 renders, for what the drop-in touches,
// with deploy/haproxy-ingress/values.yaml (release "haproxy-ingress" in
// namespace {{ns}}): written from its templates/_podtemplate.yaml,
// clusterrole.yaml, role.yaml and their bindings (haproxy-ingress/charts,
// tag 0.16.1; 0.17.0-alpha.2 differs only by an image tag and a
// referencegrants grant). Facts it holds: pod-level
// automountServiceAccountToken false and the token projected into the
// controller container only; one emptyDir "scratch" mounted with subPaths
// etc, lib and run in the init container (etc only) and both containers;
// the HAProxy container's args and no command; the controller image's
// USER 99 (no runAsUser is set: the image decides). Helm is not run here:
// if the chart changes these, this copy must follow.
const chartObjects = `apiVersion: v1
kind: ServiceAccount
metadata:
  name: haproxy-ingress
  namespace: {{ns}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: haproxy-ingress
rules:
  - apiGroups: ["discovery.k8s.io"]
    resources: [endpointslices]
    verbs: [list, watch]
  - apiGroups: [""]
    resources: [configmaps, endpoints, nodes, secrets]
    verbs: [list, watch]
  - apiGroups: [""]
    resources: [namespaces, nodes]
    verbs: [get, list, watch]
  - apiGroups: [""]
    resources: [pods, services]
    verbs: [get, list, watch]
  - apiGroups: [extensions, networking.k8s.io]
    resources: [ingresses, ingressclasses]
    verbs: [get, list, watch]
  - apiGroups: [gateway.networking.k8s.io, networking.x-k8s.io]
    resources: [gateways, gatewayclasses, httproutes, tlsroutes, tcproutes, udproutes, backendpolicies]
    verbs: [get, list, watch]
  - apiGroups: [""]
    resources: [events]
    verbs: [create, patch]
  - apiGroups: [extensions, networking.k8s.io]
    resources: [ingresses/status]
    verbs: [patch, update]
  - apiGroups: [gateway.networking.k8s.io, networking.x-k8s.io]
    resources: [gateways/status, gatewayclasses/status, httproutes/status, tlsroutes/status, tcproutes/status, udproutes/status, backendpolicies/status]
    verbs: [update]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: haproxy-ingress
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: haproxy-ingress
subjects:
  - kind: ServiceAccount
    name: haproxy-ingress
    namespace: {{ns}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: haproxy-ingress
  namespace: {{ns}}
rules:
  - apiGroups: [coordination.k8s.io]
    resources: [leases]
    verbs: [get, create, update]
  - apiGroups: [""]
    resources: [pods, secrets, namespaces]
    verbs: [get]
  - apiGroups: [apps]
    resources: [daemonsets, replicasets]
    verbs: [get]
  - apiGroups: [""]
    resources: [configmaps, endpoints]
    verbs: [get, create, update]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: haproxy-ingress
  namespace: {{ns}}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: haproxy-ingress
subjects:
  - kind: ServiceAccount
    name: haproxy-ingress
    namespace: {{ns}}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: haproxy-ingress
  namespace: {{ns}}
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
      automountServiceAccountToken: false
      initContainers:
        - name: haproxy-ingress-init
          image: quay.io/jcmoraisjr/haproxy-ingress:v0.16.1
          args: ["--init"]
          volumeMounts:
            - {mountPath: /etc/haproxy, name: scratch, subPath: etc}
      containers:
        - name: haproxy-ingress
          image: quay.io/jcmoraisjr/haproxy-ingress:v0.16.1
          args:
            - --configmap={{ns}}/haproxy-ingress
            - --ingress-class=haproxy
            - --master-socket=/var/run/haproxy/master.sock
            - --sort-backends
          env:
            - name: POD_NAME
              valueFrom: {fieldRef: {fieldPath: metadata.name}}
            - name: POD_NAMESPACE
              valueFrom: {fieldRef: {fieldPath: metadata.namespace}}
          volumeMounts:
            - {mountPath: /etc/haproxy, name: scratch, subPath: etc}
            - {mountPath: /var/lib/haproxy, name: scratch, subPath: lib}
            - {mountPath: /var/run/haproxy, name: scratch, subPath: run}
            - {mountPath: /var/run/secrets/kubernetes.io/serviceaccount, name: kube-api-access, readOnly: true}
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
            - {mountPath: /etc/haproxy, name: scratch, subPath: etc}
            - {mountPath: /var/lib/haproxy, name: scratch, subPath: lib}
            - {mountPath: /var/run/haproxy, name: scratch, subPath: run}
          securityContext:
            runAsUser: 0
      volumes:
        - name: scratch
          emptyDir: {}
        - name: kube-api-access
          projected:
            defaultMode: 0644
            sources:
              - serviceAccountToken: {expirationSeconds: 3600, path: token}
              - configMap:
                  name: kube-root-ca.crt
                  items: [{key: ca.crt, path: ca.crt}]
              - downwardAPI:
                  items: [{path: namespace, fieldRef: {fieldPath: metadata.namespace}}]
      terminationGracePeriodSeconds: 60
      dnsPolicy: ClusterFirst
      hostNetwork: false
`

// RenderHAProxyIngress runs deploy/haproxy-ingress/post-render's
// kustomization over chartObjects released in the README's namespace, as
// post-render.sh does.
func RenderHAProxyIngress(t harness.TB) Rendered {
	t.Helper()
	return RenderHAProxyIngressIn(t, HAProxyIngressRelease)
}

// RenderHAProxyIngressIn is RenderHAProxyIngress for a release in ns, with
// the change deploy/haproxy-ingress/README.md asks of an operator
// installing elsewhere: the post-renderer's bindings name ns.
func RenderHAProxyIngressIn(t harness.TB, ns string) Rendered {
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
		if name == "hapsuper-rbac.yaml" {
			b = []byte(strings.ReplaceAll(string(b), "namespace: "+HAProxyIngressRelease, "namespace: "+ns))
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatalf("%v", err)
		}
	}
	chart := strings.ReplaceAll(chartObjects, "{{ns}}", ns)
	if err := os.WriteFile(filepath.Join(dir, "chart.yaml"), []byte(chart), 0o644); err != nil {
		t.Fatalf("%v", err)
	}
	r := Render(t, dir)
	for _, o := range r.Objects {
		if o.GetKind() == "Role" || o.GetKind() == "RoleBinding" {
			o.SetNamespace(ns) // the chart's are namespaced; the post-renderer's take the release's
		}
	}
	return r
}

// IngressPod is the rendered haproxy-ingress pod as the harness runs it:
// its two containers, and where each of the volumes it mounts lives on
// this machine.
type IngressPod struct {
	Spec       corev1.PodSpec
	Controller corev1.Container // "haproxy-ingress", the controller
	HAProxy    corev1.Container // "haproxy", hapsuper's (the image's ENTRYPOINT `hapsuper --` with its args)
}

// ParseIngressPod takes the Deployment out of r.
func ParseIngressPod(r Rendered) (IngressPod, error) {
	ds := r.Find("Deployment")
	if len(ds) != 1 {
		return IngressPod{}, fmt.Errorf("rendered %v: want one Deployment", r.Kinds())
	}
	var d appsv1.Deployment
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(ds[0].Object, &d); err != nil {
		return IngressPod{}, fmt.Errorf("decode Deployment: %w", err)
	}
	p := IngressPod{Spec: d.Spec.Template.Spec}
	for _, c := range p.Spec.Containers {
		switch c.Name {
		case "haproxy-ingress":
			p.Controller = c
		case "haproxy":
			p.HAProxy = c
		}
	}
	if p.Controller.Name == "" || p.HAProxy.Name == "" {
		return IngressPod{}, fmt.Errorf("Deployment %s: want containers haproxy-ingress and haproxy", d.Name)
	}
	return p, nil
}

// Volume returns the pod's volume name.
func (p IngressPod) Volume(name string) (corev1.Volume, bool) {
	for _, v := range p.Spec.Volumes {
		if v.Name == name {
			return v, true
		}
	}
	return corev1.Volume{}, false
}

// Dirs maps what a container mounts to this machine's directories: the
// harness has no mount namespaces, so each volume (or subPath of one) is a
// directory, and a container's paths under a mount point are rewritten to
// it. Volumes maps a volume name, or "name/subPath", to its directory.
type Dirs struct {
	Volumes map[string]string
}

// IngressDirs is where the harness makes the rendered pod's volumes, under
// base: the chart's scratch subPaths where the controller's
// --local-filesystem-prefix (base/fs) expects them, hapsuper's private
// directory, and each container's projected ServiceAccount volume.
func IngressDirs(base string) Dirs {
	prefix := filepath.Join(base, "fs")
	return Dirs{Volumes: map[string]string{
		"scratch/etc":         filepath.Join(prefix, "etc/haproxy"),
		"scratch/lib":         filepath.Join(prefix, "var/lib/haproxy"),
		"scratch/run":         filepath.Join(prefix, "var/run/haproxy"),
		"hapsuper-run":        filepath.Join(base, "hapsuper-run"),
		"hapsuper-api-access": filepath.Join(base, "hapsuper-api-access"),
		"kube-api-access":     filepath.Join(base, "kube-api-access"),
	}}
}

// Prefix is the controller's --local-filesystem-prefix.
func (d Dirs) Prefix() string {
	return strings.TrimSuffix(d.Volumes["scratch/etc"], "/etc/haproxy")
}

// Mounts returns c's mount points and the directory each one is, or an
// error naming a volume the harness does not make: the rendered pod
// mounts something the harness would silently leave out.
func (d Dirs) Mounts(c corev1.Container) (map[string]string, error) {
	out := map[string]string{}
	for _, m := range c.VolumeMounts {
		key := m.Name
		if m.SubPath != "" {
			key += "/" + m.SubPath
		}
		dir, ok := d.Volumes[key]
		if !ok {
			return nil, fmt.Errorf("container %s mounts %s at %s: the harness makes no such volume", c.Name, key, m.MountPath)
		}
		out[m.MountPath] = dir
	}
	return out, nil
}

// Rewrite rewrites every container path in args (whole arguments, values
// after '=' and before the first ',') that lies under one of mounts.
// An absolute path under none of them is an error: the harness has no
// such file.
func Rewrite(args []string, mounts map[string]string) ([]string, error) {
	out := make([]string, len(args))
	for i, a := range args {
		prefix, path := "", a
		if strings.HasPrefix(a, "--") {
			if k, v, ok := strings.Cut(a, "="); ok {
				prefix, path = k+"=", v
			}
		}
		path, rest, _ := strings.Cut(path, ",")
		if rest != "" {
			rest = "," + rest
		}
		if !strings.HasPrefix(path, "/") {
			out[i] = a
			continue
		}
		mapped, ok := "", false
		for mp, dir := range mounts {
			if path == mp || strings.HasPrefix(path, mp+"/") {
				mapped, ok = dir+strings.TrimPrefix(path, mp), true
				break
			}
		}
		if !ok {
			return nil, fmt.Errorf("argument %q: %s is under no mount of the container", a, path)
		}
		out[i] = prefix + mapped + rest
	}
	return out, nil
}
