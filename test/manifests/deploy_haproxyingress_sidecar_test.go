package manifests_test

import (
	"flag"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/hapsuper/hapsuper/conf"
	"github.com/hapsuper/hapsuper/test/harness/kube"
)

// The haproxy-ingress chart the sidecar values are for (hack/charts.sh
// fetches it and checks this sum).
const (
	haproxyIngressChart       = "haproxy-ingress-chart-0.16.1.tar.gz"
	haproxyIngressChartSHA256 = "8edf5802d9687794eac6a372872df96135bee375668ab223556b1a18de9a86dc"
)

// deploy/haproxy-ingress/sidecar-values.yaml, rendered by Helm with the
// real chart (0.16.1): the chart's external HAProxy keeps the chart's image
// and command; hapsuper is a native sidecar (an init container with
// restartPolicy Always) that reads the master CLI where the chart's -S puts
// it, on the same volume, and whose gate socket is the one the HAProxy
// container's preStop hook asks; it has the pod's identity, the chart's
// token, a grace period equal to the pod's, and settings `hapsuper
// sidecar` accepts.
func TestDeploy_HAProxyIngressSidecar(t *testing.T) {
	objs := kube.HelmTemplate(t, haproxyIngressChart, haproxyIngressChartSHA256, "haproxy-ingress",
		"haproxy-ingress", "ingress-controller",
		filepath.Join(kube.DeployDir(t), "haproxy-ingress", "sidecar-values.yaml")).Objects
	var d appsv1.Deployment
	for _, o := range objs {
		if o.GetKind() == "Deployment" {
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &d); err != nil {
				t.Fatal(err)
			}
		}
	}
	spec := d.Spec.Template.Spec
	var hap, sc *corev1.Container
	for i := range spec.Containers {
		if spec.Containers[i].Name == "haproxy" {
			hap = &spec.Containers[i]
		}
	}
	for i := range spec.InitContainers {
		if spec.InitContainers[i].Name == "hapsuper" {
			sc = &spec.InitContainers[i]
		}
	}
	if hap == nil || sc == nil {
		t.Fatalf("rendered Deployment %q: containers %d, init containers %d: want haproxy and the hapsuper sidecar", d.Name, len(spec.Containers), len(spec.InitContainers))
	}
	if sc.RestartPolicy == nil || *sc.RestartPolicy != corev1.ContainerRestartPolicyAlways {
		t.Errorf("init container hapsuper restartPolicy %v: want Always", sc.RestartPolicy)
	}
	if strings.Contains(hap.Image, "hapsuper") {
		t.Errorf("haproxy container image %q: want the chart's, not rebuilt", hap.Image)
	}

	// The sidecar's settings, as it parses them.
	var gateSocket string
	s, err := conf.ParseWith(sc.Args, hapsuperEnv(*sc), func(fs *flag.FlagSet) {
		fs.StringVar(&gateSocket, "gate-socket", "", "")
		fs.String("gate-addr", "", "")
	})
	if err != nil {
		t.Fatalf("hapsuper sidecar refuses the sidecar's settings: %v", err)
	}
	if tgps := spec.TerminationGracePeriodSeconds; tgps == nil || time.Duration(*tgps)*time.Second != s.GracePeriod {
		t.Errorf("sidecar grace period %v, pod's terminationGracePeriodSeconds %v: want the same", s.GracePeriod, tgps)
	}
	for name, field := range map[string]string{"POD_NAME": "metadata.name", "POD_NAMESPACE": "metadata.namespace", "POD_IPS": "status.podIPs", "NODE_NAME": "spec.nodeName"} {
		if got := fieldRefs(*sc)[name]; got != field {
			t.Errorf("sidecar env %s from %q, want %q", name, got, field)
		}
	}

	// HAProxy's -S is the sidecar's --master-socket, on a volume both mount
	// at the same path.
	i := slices.Index(hap.Args, "-S")
	if i < 0 || i+1 >= len(hap.Args) {
		t.Fatalf("haproxy args %v: no -S", hap.Args)
	}
	sock := strings.Split(hap.Args[i+1], ",")[0]
	if sock != s.MasterSocket {
		t.Errorf("haproxy -S %s, sidecar --master-socket %s: want the same", sock, s.MasterSocket)
	}
	for _, p := range []string{sock, gateSocket} {
		a, b := mountOf(*hap, p), mountOf(*sc, p)
		if a == "" || a != b {
			t.Errorf("%s: haproxy mounts %q, the sidecar %q: want the same volume", p, a, b)
		}
	}
	if hap.Lifecycle == nil || hap.Lifecycle.PreStop == nil || hap.Lifecycle.PreStop.Exec == nil ||
		!strings.Contains(strings.Join(hap.Lifecycle.PreStop.Exec.Command, " "), "UNIX-CONNECT:"+gateSocket+" ") {
		t.Errorf("haproxy preStop %+v: want an exec hook on the sidecar's gate %s", hap.Lifecycle, gateSocket)
	}

	// The token: the chart's projected volume, mounted in the sidecar.
	token, _, _ := strings.Cut(mountOf(*sc, "/var/run/secrets/kubernetes.io/serviceaccount/token"), ":")
	if !slices.ContainsFunc(tokenVolumes(&d), func(v corev1.Volume) bool { return v.Name == token }) {
		t.Errorf("the sidecar's token mount %q is no projected service-account token of the pod", token)
	}
}

// mountOf is the volume:subPath c mounts where path lives; "" when none.
func mountOf(c corev1.Container, path string) string {
	best := corev1.VolumeMount{}
	for _, m := range c.VolumeMounts {
		if (path == m.MountPath || strings.HasPrefix(path, strings.TrimSuffix(m.MountPath, "/")+"/")) && len(m.MountPath) > len(best.MountPath) {
			best = m
		}
	}
	if best.Name == "" {
		return ""
	}
	return best.Name + ":" + best.SubPath
}
