package manifests_test

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/hapsuper/hapsuper/conf"
	"github.com/hapsuper/hapsuper/test/harness/kube"
)

// overlays/sidecar (components/sidecar on the kube-proxy overlay) renders
// the official haproxy image as it is, with hapsuper as a native sidecar:
// an init container with restartPolicy Always that has the settings, the
// pod's identity, the shared emptyDir and the token; the haproxy container
// runs HAProxy in master-worker mode with its master CLI on that emptyDir,
// has no token, and asks the sidecar's gate in its preStop hook, on the
// socket the sidecar serves by default. hapsuper sidecar accepts the
// settings.
func TestDeploy_Sidecar(t *testing.T) {
	r := kube.Render(t, filepath.Join(kube.DeployDir(t), "overlays", "sidecar"))
	t.Logf("overlays/sidecar: %s", strings.Join(r.Kinds(), " "))
	d, c := deployment(t, r)
	spec := d.Spec.Template.Spec
	if len(spec.InitContainers) != 1 {
		t.Fatalf("init containers %d, want the hapsuper sidecar", len(spec.InitContainers))
	}
	sc := spec.InitContainers[0]
	if sc.RestartPolicy == nil || *sc.RestartPolicy != corev1.ContainerRestartPolicyAlways {
		t.Errorf("init container %s restartPolicy %v: want Always (a native sidecar)", sc.Name, sc.RestartPolicy)
	}
	if !strings.HasPrefix(sc.Image, "hapsuper-sidecar") {
		t.Errorf("sidecar image %q: want the Dockerfile's sidecar target", sc.Image)
	}
	if !strings.HasPrefix(c.Image, "haproxy:") {
		t.Errorf("haproxy container image %q: want the official image", c.Image)
	}

	// The sidecar has what hapsuper needs; HAProxy's container keeps none
	// of it but the shared volume.
	checkDrainWiring(t, d, withoutPreStop(sc))
	if v, _ := envValue(sc, "HAPSUPER_ROUTING"); v != conf.RoutingKubeProxy {
		t.Errorf("sidecar HAPSUPER_ROUTING = %q, want kube-proxy", v)
	}
	s, err := conf.ParseWith(nil, hapsuperEnv(sc), nil)
	if err != nil {
		t.Fatalf("hapsuper refuses the sidecar's settings: %v", err)
	}
	checkToken(t, r, d, sc)
	if len(c.Env) > 0 {
		t.Errorf("haproxy container env %v: hapsuper's settings belong to the sidecar", c.Env)
	}
	for _, m := range c.VolumeMounts {
		if strings.Contains(m.MountPath, "serviceaccount") {
			t.Errorf("haproxy container mounts the token at %s: only the sidecar talks to the API", m.MountPath)
		}
	}
	shared := func(ms []corev1.VolumeMount) string {
		for _, m := range ms {
			if m.MountPath == "/var/run/hapsuper" {
				return m.Name
			}
		}
		return ""
	}
	if a, b := shared(c.VolumeMounts), shared(sc.VolumeMounts); a == "" || a != b {
		t.Errorf("/var/run/hapsuper: haproxy mounts %q, sidecar %q: want the same volume", a, b)
	}

	// HAProxy's command puts its master CLI where the sidecar reads it.
	i := slices.Index(c.Command, "-S")
	if i < 0 || i+1 >= len(c.Command) || strings.Split(c.Command[i+1], ",")[0] != s.MasterSocket {
		t.Errorf("haproxy command %v: want -S on the sidecar's --master-socket %s", c.Command, s.MasterSocket)
	}
	if !slices.Contains(c.Command, "-W") || !slices.Contains(c.Command, "-db") {
		t.Errorf("haproxy command %v: want master-worker mode in the foreground (-W -db)", c.Command)
	}
	// The hook asks the gate on the sidecar's default socket.
	if c.Lifecycle == nil || c.Lifecycle.PreStop == nil || c.Lifecycle.PreStop.Exec == nil {
		t.Fatalf("haproxy container preStop %+v: want an exec hook on the gate", c.Lifecycle)
	}
	hook := strings.Join(c.Lifecycle.PreStop.Exec.Command, " ")
	if !strings.Contains(hook, "UNIX-CONNECT:/var/run/hapsuper/gate.sock") {
		t.Errorf("preStop %q: want the gate socket /var/run/hapsuper/gate.sock", hook)
	}
}

// withoutPreStop is c with no lifecycle: checkDrainWiring refuses a preStop
// hook, which is PID 1 mode's rule, not the sidecar's.
func withoutPreStop(c corev1.Container) corev1.Container {
	c.Lifecycle = nil
	return c
}
