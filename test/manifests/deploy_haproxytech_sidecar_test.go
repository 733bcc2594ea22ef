package manifests_test

import (
	"flag"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/hapsuper/hapsuper/conf"
	"github.com/hapsuper/hapsuper/test/harness/kube"
)

// deploy/haproxytech-ingress/sidecar-values.yaml, rendered by Helm with the
// real chart (1.52.1): the controller's container keeps the chart's image,
// with an httpGet preStop on the sidecar's gate port; hapsuper is a native
// sidecar as the pod's user, on the chart's /run volume at the same path,
// whose settings `hapsuper sidecar` accepts: the master socket and the s6
// service directory under that /run, a gate on the hook's port, a grace
// period equal to the pod's, the pod's identity.
func TestDeploy_HAProxyTechSidecar(t *testing.T) {
	objs := kube.HelmTemplate(t, kube.HAProxyTechChartTarball, kube.HAProxyTechChartSHA256, "kubernetes-ingress",
		"haproxy-kubernetes-ingress", "haproxy-controller",
		filepath.Join(kube.DeployDir(t), "haproxytech-ingress", "sidecar-values.yaml")).Objects
	d := renderedDeployment(t, objs)
	spec := d.Spec.Template.Spec
	if len(spec.Containers) != 1 || len(spec.InitContainers) != 1 {
		t.Fatalf("containers %d, init containers %d: want the controller's and the hapsuper sidecar", len(spec.Containers), len(spec.InitContainers))
	}
	c, sc := spec.Containers[0], spec.InitContainers[0]
	if sc.RestartPolicy == nil || *sc.RestartPolicy != corev1.ContainerRestartPolicyAlways {
		t.Errorf("init container %s restartPolicy %v: want Always", sc.Name, sc.RestartPolicy)
	}
	if strings.Contains(c.Image, "hapsuper") {
		t.Errorf("controller image %q: want the chart's, not rebuilt", c.Image)
	}
	if sc.SecurityContext != nil && sc.SecurityContext.RunAsUser != nil {
		t.Errorf("the sidecar runs as uid %d: want the pod's user, which owns the master socket and s6's FIFO", *sc.SecurityContext.RunAsUser)
	}
	var gateAddr, s6 string
	s, err := conf.ParseWith(sc.Args, hapsuperEnv(sc), func(fs *flag.FlagSet) {
		fs.StringVar(&gateAddr, "gate-addr", "", "")
		fs.String("gate-socket", "", "")
		fs.StringVar(&s6, "s6-service", "", "")
	})
	if err != nil {
		t.Fatalf("hapsuper sidecar refuses the sidecar's settings: %v", err)
	}
	if tgps := spec.TerminationGracePeriodSeconds; tgps == nil || time.Duration(*tgps)*time.Second != s.GracePeriod {
		t.Errorf("sidecar grace period %v, pod's %v: want the same", s.GracePeriod, tgps)
	}
	for name, field := range map[string]string{"POD_NAME": "metadata.name", "POD_NAMESPACE": "metadata.namespace", "POD_IPS": "status.podIPs", "NODE_NAME": "spec.nodeName"} {
		if got := fieldRefs(sc)[name]; got != field {
			t.Errorf("sidecar env %s from %q, want %q", name, got, field)
		}
	}
	for _, p := range []string{s.MasterSocket, s6 + "/supervise/control", s.StatusSocket} {
		a, b := mountOf(c, p), mountOf(sc, p)
		if a == "" || a != b {
			t.Errorf("%s: the controller's container mounts %q, the sidecar %q: want the same volume at the same path", p, a, b)
		}
	}
	if !strings.HasPrefix(s.MasterSocket, "/run/") || s6 != "/run/service/haproxy" {
		t.Errorf("master socket %s, s6 service %q: want the image's /var/run/haproxy-master.sock and /run/service/haproxy under the chart's /run", s.MasterSocket, s6)
	}
	hook := c.Lifecycle
	if hook == nil || hook.PreStop == nil || hook.PreStop.HTTPGet == nil || hook.PreStop.HTTPGet.Path != "/gate" ||
		!strings.HasSuffix(gateAddr, ":"+hook.PreStop.HTTPGet.Port.String()) {
		t.Errorf("controller preStop %+v: want an httpGet on the sidecar's gate %s/gate", hook, gateAddr)
	}
}
