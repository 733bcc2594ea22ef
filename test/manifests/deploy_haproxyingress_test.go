package manifests_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/hapsuper/hapsuper/conf"
	"github.com/hapsuper/hapsuper/test/harness/kube"
	"sigs.k8s.io/yaml"
)

// The post-renderer gives the chart's (0.16.1) HAProxy container
// hapsuper's settings (grace period equal to the pod's and to values.yaml),
// the pod's identity, a private directory for its sockets, two master
// sockets (hapsuper's, in that directory, which hapsuper picks; the
// controller's, where the chart's --master-socket points, owned by the
// controller image's uid 99, mode 600) and a ServiceAccount token of its
// own, root-only (0400), in that container only. The controller container
// is not touched.
func TestDeploy_HAProxyIngress(t *testing.T) {
	r := kube.RenderHAProxyIngress(t)
	d, c := deployment(t, r)

	g := checkDrainWiring(t, d, c)
	var values struct {
		Controller struct {
			TerminationGracePeriodSeconds int64             `json:"terminationGracePeriodSeconds"`
			Config                        map[string]string `json:"config"`
		} `json:"controller"`
	}
	b, err := os.ReadFile(filepath.Join(kube.DeployDir(t), "haproxy-ingress", "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &values); err != nil {
		t.Fatalf("parse values.yaml: %v", err)
	}
	if got := values.Controller.TerminationGracePeriodSeconds; time.Duration(got)*time.Second != g {
		t.Errorf("values.yaml controller.terminationGracePeriodSeconds = %d, hapsuper-patch.yaml HAPSUPER_GRACE_PERIOD = %v: want the same", got, g)
	}
	// The workers drop to the controller's uid, so that the admin socket
	// is its and the token is not theirs.
	if v := values.Controller.Config["use-haproxy-user"]; v != "true" {
		t.Errorf("values.yaml use-haproxy-user %q: want \"true\", the workers and the admin socket as haproxy (uid 99)", v)
	}

	// The image's ENTRYPOINT is `hapsuper --`; the patched args follow.
	s, err := conf.Parse(append([]string{"--"}, c.Args...), hapsuperEnv(c))
	if err != nil {
		t.Fatalf("hapsuper refuses the HAProxy arguments with the patch's settings: %v", err)
	}
	if s.MasterSocket != "/var/run/hapsuper/master.sock" {
		t.Errorf("hapsuper's master socket %q: want /var/run/hapsuper/master.sock, in its private directory", s.MasterSocket)
	}
	if s.Routing != conf.RoutingKubeProxy {
		t.Errorf("routing %q: want kube-proxy", s.Routing)
	}
	pod, err := kube.ParseIngressPod(r)
	if err != nil {
		t.Fatal(err)
	}
	var ctrlSocket string
	for _, a := range pod.Controller.Args {
		if v, ok := strings.CutPrefix(a, "--master-socket="); ok {
			ctrlSocket = v
		}
	}
	if want := ctrlSocket + ",mode,600,uid,99,gid,99"; !slices.Contains(c.Args, want) {
		t.Errorf("haproxy args %q: want a -S %s for the controller (uid 99)", c.Args, want)
	}

	// hapsuper's token: in the haproxy container only, root-only.
	v, ok := pod.Volume("hapsuper-api-access")
	if !ok || v.Projected == nil || v.Projected.DefaultMode == nil || *v.Projected.DefaultMode != 0o400 {
		t.Errorf("volume hapsuper-api-access %+v: want a projected token, defaultMode 0400", v)
	}
	for _, ctr := range d.Spec.Template.Spec.Containers {
		mounted := slices.ContainsFunc(ctr.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == "hapsuper-api-access" })
		if mounted != (ctr.Name == "haproxy") {
			t.Errorf("container %s mounts hapsuper-api-access: %v; want only haproxy", ctr.Name, mounted)
		}
	}

	// What the harness runs (test/k8s/haproxyingress_real_test.go) is this
	// render, its container paths mapped to kube.IngressDirs: every mount
	// of both containers is a directory the harness makes, every path in
	// their args lies under one.
	dirs := kube.IngressDirs("/harness")
	for _, ctr := range []corev1.Container{pod.HAProxy, pod.Controller} {
		mounts, err := dirs.Mounts(ctr)
		if err != nil {
			t.Errorf("the harness cannot run the rendered pod: %v", err)
			continue
		}
		if _, err := kube.Rewrite(ctr.Args, mounts); err != nil {
			t.Errorf("the harness cannot run container %s's args: %v", ctr.Name, err)
		}
	}

	// The routing grants go to the chart's ServiceAccount, in the
	// namespace of the README's command.
	sa := d.Spec.Template.Spec.ServiceAccountName
	for _, kind := range []string{"RoleBinding", "ClusterRoleBinding"} {
		var found bool
		for _, binding := range r.Find(kind) {
			if binding.GetName() != "hapsuper-routing" && binding.GetName() != "hapsuper-routing-nodes" {
				continue
			}
			found = true
			subjects, _, _ := unstructured.NestedSlice(binding.Object, "subjects")
			if len(subjects) != 1 {
				t.Fatalf("%s subjects %v, want one", kind, subjects)
			}
			subj, _ := subjects[0].(map[string]any)
			if subj["kind"] != "ServiceAccount" || subj["name"] != sa || subj["namespace"] != "ingress-controller" {
				t.Errorf("%s subject %v: want ServiceAccount %s in ingress-controller (the chart's)", kind, subj, sa)
			}
		}
		if !found {
			t.Errorf("no %s of hapsuper-rbac.yaml rendered", kind)
		}
	}
	if len(pod.Controller.Env) != 2 || len(pod.Controller.VolumeMounts) != 4 {
		t.Errorf("the controller container changed: env %+v, mounts %+v", pod.Controller.Env, pod.Controller.VolumeMounts)
	}
}

// The check above fails when the harness and the render disagree: a mount
// the harness does not make, or an argument outside every mount.
func TestDeploy_HAProxyIngressHarnessDisagrees(t *testing.T) {
	pod, err := kube.ParseIngressPod(kube.RenderHAProxyIngress(t))
	if err != nil {
		t.Fatal(err)
	}
	dirs := kube.IngressDirs("/harness")
	delete(dirs.Volumes, "hapsuper-run")
	if _, err := dirs.Mounts(pod.HAProxy); err == nil || !strings.Contains(err.Error(), "hapsuper-run") {
		t.Errorf("a mount the harness does not make: error %v, want one naming hapsuper-run", err)
	}
	mounts, err := kube.IngressDirs("/harness").Mounts(pod.HAProxy)
	if err != nil {
		t.Fatal(err)
	}
	got, err := kube.Rewrite([]string{"-S", "/var/run/haproxy/master.sock,mode,600"}, mounts)
	if err != nil || got[1] != "/harness/fs/var/run/haproxy/master.sock,mode,600" {
		t.Errorf("rewrite of the controller's socket: %q, %v", got, err)
	}
	if _, err := kube.Rewrite([]string{"-f", "/usr/local/etc/haproxy"}, mounts); err == nil {
		t.Error("a path under no mount was rewritten without an error")
	}
}
