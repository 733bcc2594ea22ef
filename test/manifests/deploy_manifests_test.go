package manifests_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hapsuper/hapsuper/conf"
	"github.com/hapsuper/hapsuper/haproxy"
	"github.com/hapsuper/hapsuper/test/harness/kube"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// serviceAccountDir is where client-go's in-cluster config reads the token,
// CA and namespace.
const serviceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// Every overlay renders to a pod that hapsuper runs in as documented: the
// grace period wired to HAPSUPER_GRACE_PERIOD, no preStop hook, the pod's
// identity from the downward API, the routing mode of the overlay's name,
// and a service-account token only where routing needs one, mounted
// read-only with mode 0400. hapsuper's own settings parser and config
// inspection accept the container's settings and the example haproxy.cfg
// without a warning. No cluster needed.
func TestDeploy_Manifests(t *testing.T) {
	for _, mode := range kube.RoutingOverlays {
		t.Run(mode, func(t *testing.T) {
			r := kube.Render(t, filepath.Join(kube.DeployDir(t), "overlays", mode))
			t.Logf("overlays/%s: %s", mode, strings.Join(r.Kinds(), " "))
			d, c := deployment(t, r)
			checkPod(t, d, c, mode)
			checkHapsuperAccepts(t, c)
			checkConfigMapMounted(t, r, d)
			if mode == conf.RoutingOff {
				checkNoToken(t, r, d)
			} else {
				checkToken(t, r, d, c)
			}
		})
	}
	t.Run("base is off", func(t *testing.T) {
		r := kube.Render(t, filepath.Join(kube.DeployDir(t), "base"))
		d, c := deployment(t, r)
		checkPod(t, d, c, conf.RoutingOff)
		checkNoToken(t, r, d)
	})
}

// checkPod checks what every variant's pod must hold.
func checkPod(t *testing.T, d *appsv1.Deployment, c corev1.Container, mode string) {
	t.Helper()
	checkDrainWiring(t, d, c)
	spec := d.Spec.Template.Spec
	if v, _ := envValue(c, "HAPSUPER_ROUTING"); v != mode {
		t.Errorf("HAPSUPER_ROUTING = %q: want %q", v, mode)
	}
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		t.Errorf("automountServiceAccountToken = %v: want false (the routing overlays mount their own token)", ptrValue(spec.AutomountServiceAccountToken))
	}
	if c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet == nil || c.ReadinessProbe.HTTPGet.Port.String() != "probe" {
		t.Errorf("readiness probe %+v: want an HTTP GET on the probe port", c.ReadinessProbe)
	}
}

// checkDrainWiring checks what hapsuper needs of any pod it runs in, ours
// or a chart's: the grace period wired to HAPSUPER_GRACE_PERIOD, no
// preStop hook, the pod's identity from the downward API and a volume for
// its sockets. It returns the grace period.
func checkDrainWiring(t *testing.T, d *appsv1.Deployment, c corev1.Container) time.Duration {
	t.Helper()
	tgps := d.Spec.Template.Spec.TerminationGracePeriodSeconds
	grace, ok := envValue(c, "HAPSUPER_GRACE_PERIOD")
	if !ok {
		t.Errorf("container haproxy has no HAPSUPER_GRACE_PERIOD")
	}
	g, err := time.ParseDuration(grace)
	if err != nil || tgps == nil || g != time.Duration(*tgps)*time.Second {
		t.Errorf("HAPSUPER_GRACE_PERIOD = %q, terminationGracePeriodSeconds = %v: want the same duration", grace, ptrValue(tgps))
	}
	if c.Lifecycle != nil && c.Lifecycle.PreStop != nil {
		t.Errorf("container haproxy has a preStop hook %+v: hapsuper decides how long the pod serves; remove it", c.Lifecycle.PreStop)
	}
	got := fieldRefs(c)
	for name, field := range map[string]string{"POD_NAME": "metadata.name", "POD_NAMESPACE": "metadata.namespace", "POD_IPS": "status.podIPs", "NODE_NAME": "spec.nodeName"} {
		if got[name] != field {
			t.Errorf("env %s from field %q: want %q", name, got[name], field)
		}
	}
	if !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == "/var/run/hapsuper" }) {
		t.Errorf("no volume on /var/run/hapsuper: hapsuper's sockets need it with readOnlyRootFilesystem")
	}
	return g
}

// checkHapsuperAccepts runs hapsuper's settings parser over the container's
// HAPSUPER_* values and the image's command (with the example haproxy.cfg),
// then its configuration inspection: no error, no warning.
func checkHapsuperAccepts(t *testing.T, c corev1.Container) {
	t.Helper()
	cfg := filepath.Join(kube.DeployDir(t), "base", "haproxy.cfg")
	s, err := conf.Parse([]string{"--", "haproxy", "-f", cfg}, hapsuperEnv(c))
	if err != nil {
		t.Fatalf("hapsuper refuses the container's settings: %v", err)
	}
	files, err := haproxy.ConfigFiles(s)
	if err != nil {
		t.Fatal(err)
	}
	in, err := haproxy.Inspect(files, s)
	if err != nil {
		t.Fatalf("hapsuper refuses the example haproxy.cfg: %v", err)
	}
	for _, w := range in.Warnings {
		t.Errorf("hapsuper warns about the example haproxy.cfg: %s", w)
	}
}

// checkConfigMapMounted checks that the generated ConfigMap holds
// base/haproxy.cfg and is the one the pod mounts on the image's path.
func checkConfigMapMounted(t *testing.T, r kube.Rendered, d *appsv1.Deployment) {
	t.Helper()
	want, err := os.ReadFile(filepath.Join(kube.DeployDir(t), "base", "haproxy.cfg"))
	if err != nil {
		t.Fatal(err)
	}
	cms := r.Find("ConfigMap")
	if len(cms) != 1 {
		t.Fatalf("kube.Rendered %v: want one ConfigMap", r.Kinds())
	}
	if got, _, _ := unstructured.NestedString(cms[0].Object, "data", "haproxy.cfg"); got != string(want) {
		t.Errorf("ConfigMap %s data haproxy.cfg differs from base/haproxy.cfg", cms[0].GetName())
	}
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Name == "config" {
			if v.ConfigMap == nil || v.ConfigMap.Name != cms[0].GetName() {
				t.Errorf("volume config %+v: want ConfigMap %s", v.VolumeSource, cms[0].GetName())
			}
			return
		}
	}
	t.Errorf("no volume config in the pod")
}

// checkNoToken: routing off has no API access at all.
func checkNoToken(t *testing.T, r kube.Rendered, d *appsv1.Deployment) {
	t.Helper()
	if v := tokenVolumes(d); len(v) > 0 {
		t.Errorf("routing off mounts a token volume %s: want none", v[0].Name)
	}
	if sa := d.Spec.Template.Spec.ServiceAccountName; sa != "" {
		t.Errorf("routing off runs as service account %q: want the namespace's default (no token)", sa)
	}
	for _, kind := range []string{"ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"} {
		if len(r.Find(kind)) > 0 {
			t.Errorf("routing off renders a %s: want no RBAC", kind)
		}
	}
}

// checkToken: the routing overlays project the standard three sources
// read-only with mode 0400, where client-go looks, for a service account
// the render binds.
func checkToken(t *testing.T, r kube.Rendered, d *appsv1.Deployment, c corev1.Container) {
	t.Helper()
	vols := tokenVolumes(d)
	if len(vols) != 1 {
		t.Fatalf("%d token volumes: want 1", len(vols))
	}
	v := vols[0]
	if m := v.Projected.DefaultMode; m == nil || *m != 0o400 {
		t.Errorf("token volume %s defaultMode = %v: want 0400 (256)", v.Name, ptrValue(m))
	}
	var token, ca, ns bool
	for _, s := range v.Projected.Sources {
		switch {
		case s.ServiceAccountToken != nil:
			token = s.ServiceAccountToken.Path == "token" && ptrValue(s.ServiceAccountToken.ExpirationSeconds) == int64(3600)
		case s.ConfigMap != nil:
			ca = s.ConfigMap.Name == "kube-root-ca.crt" && len(s.ConfigMap.Items) == 1 && s.ConfigMap.Items[0].Path == "ca.crt"
		case s.DownwardAPI != nil:
			ns = len(s.DownwardAPI.Items) == 1 && s.DownwardAPI.Items[0].Path == "namespace" &&
				s.DownwardAPI.Items[0].FieldRef != nil && s.DownwardAPI.Items[0].FieldRef.FieldPath == "metadata.namespace"
		}
	}
	if !token || !ca || !ns {
		t.Errorf("token volume sources %+v: want token (3600 s), kube-root-ca.crt ca.crt and the namespace (token %v, ca %v, namespace %v)", v.Projected.Sources, token, ca, ns)
	}
	i := slices.IndexFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == v.Name })
	if i < 0 || c.VolumeMounts[i].MountPath != serviceAccountDir || !c.VolumeMounts[i].ReadOnly {
		t.Errorf("token volume mount %+v: want read-only on %s", c.VolumeMounts, serviceAccountDir)
	}
	sa := d.Spec.Template.Spec.ServiceAccountName
	if sa == "" || !slices.ContainsFunc(r.Find("ServiceAccount"), func(o *unstructured.Unstructured) bool { return o.GetName() == sa }) {
		t.Errorf("serviceAccountName %q: want a ServiceAccount of the render (%v)", sa, r.Kinds())
	}
}

func ptrValue[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

// graceReplacement is the block deploy/base/kustomization.yaml asks an
// operator's kustomization to repeat when it patches the grace period.
const graceReplacement = `
replacements:
  - source:
      kind: Deployment
      name: haproxy
      fieldPath: spec.template.spec.terminationGracePeriodSeconds
    targets:
      - select:
          kind: Deployment
          name: haproxy
        fieldPaths:
          - spec.template.spec.containers.[name=haproxy].env.[name=HAPSUPER_GRACE_PERIOD].value
        options:
          delimiter: "s"
          index: 0
`

// An operator's overlay that raises terminationGracePeriodSeconds and
// repeats the documented replacement gets the same HAPSUPER_GRACE_PERIOD;
// hapsuper accepts it.
func TestDeploy_GracePeriodFollowsPatch(t *testing.T) {
	patch := `patches:
  - target:
      kind: Deployment
      name: haproxy
    patch: |-
      - op: replace
        path: /spec/template/spec/terminationGracePeriodSeconds
        value: 75
`
	r := kube.RenderIn(t, "overlays/endpointslices", "shop", patch+graceReplacement)
	d, c := deployment(t, r)
	if g := ptrValue(d.Spec.Template.Spec.TerminationGracePeriodSeconds); g != int64(75) {
		t.Fatalf("terminationGracePeriodSeconds = %v: want 75", g)
	}
	if v, _ := envValue(c, "HAPSUPER_GRACE_PERIOD"); v != "75s" {
		t.Errorf("HAPSUPER_GRACE_PERIOD = %q: want 75s", v)
	}
	checkHapsuperAccepts(t, c)
}

// components/token-isolation runs the container as root, without fsGroup
// (which would make the token readable by gid 99, the workers' group), with
// only the capabilities HAProxy needs to drop its workers to user haproxy;
// the token keeps mode 0400. The example haproxy.cfg names that user.
func TestDeploy_TokenIsolation(t *testing.T) {
	r := kube.RenderIn(t, "overlays/kube-proxy", "shop", "components:\n  - {{deploy}}/components/token-isolation\n")
	d, c := deployment(t, r)
	checkPod(t, d, c, conf.RoutingKubeProxy)
	checkToken(t, r, d, c)
	psc := d.Spec.Template.Spec.SecurityContext
	if psc == nil || ptrValue(psc.RunAsUser) != int64(0) || psc.FSGroup != nil || ptrValue(psc.RunAsNonRoot) == true {
		t.Errorf("pod securityContext %+v: want runAsUser 0, no fsGroup, runAsNonRoot not true", psc)
	}
	caps := c.SecurityContext.Capabilities
	if caps == nil || !slices.Equal(caps.Drop, []corev1.Capability{"ALL"}) || !slices.Equal(caps.Add, []corev1.Capability{"SETUID", "SETGID"}) {
		t.Errorf("capabilities %+v: want drop ALL, add SETUID SETGID", caps)
	}
	cfg, err := os.ReadFile(filepath.Join(kube.DeployDir(t), "base", "haproxy.cfg"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"user haproxy", "group haproxy"} {
		if !slices.ContainsFunc(strings.Split(string(cfg), "\n"), func(l string) bool { return strings.TrimSpace(l) == line }) {
			t.Errorf("base/haproxy.cfg has no %q line: the workers would keep root", line)
		}
	}
}
