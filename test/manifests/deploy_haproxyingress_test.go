package manifests_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/hapsuper/hapsuper/conf"
	"github.com/hapsuper/hapsuper/test/harness/kube"
	"sigs.k8s.io/yaml"
)

// The post-renderer gives the chart's HAProxy container hapsuper's
// settings (grace period equal to the pod's and to values.yaml), the pod's
// identity and a directory for its sockets, and leaves the chart's
// arguments alone; hapsuper, started by the image's ENTRYPOINT with those
// arguments, reuses the chart's master socket. The controller container is
// not touched.
func TestDeploy_HAProxyIngress(t *testing.T) {
	r := kube.RenderHAProxyIngress(t)
	d, c := deployment(t, r)

	g := checkDrainWiring(t, d, c)
	var values struct {
		Controller struct {
			TerminationGracePeriodSeconds int64 `json:"terminationGracePeriodSeconds"`
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

	// The image's ENTRYPOINT is `hapsuper --`; the chart's args follow.
	s, err := conf.Parse(append([]string{"--"}, c.Args...), hapsuperEnv(c))
	if err != nil {
		t.Fatalf("hapsuper refuses the chart's HAProxy arguments with the patch's settings: %v", err)
	}
	if s.MasterSocket != "/var/run/haproxy/master.sock" {
		t.Errorf("hapsuper's master socket %q: want the chart's /var/run/haproxy/master.sock, which the controller uses", s.MasterSocket)
	}
	if s.Routing != conf.RoutingKubeProxy {
		t.Errorf("routing %q: want kube-proxy", s.Routing)
	}
	// The routing grants go to the chart's ServiceAccount, in the
	// namespace of the README's command.
	sa := d.Spec.Template.Spec.ServiceAccountName
	for _, kind := range []string{"RoleBinding", "ClusterRoleBinding"} {
		bindings := r.Find(kind)
		if len(bindings) != 1 {
			t.Fatalf("%d %s objects rendered, want hapsuper-rbac.yaml's one", len(bindings), kind)
		}
		subjects, _, _ := unstructured.NestedSlice(bindings[0].Object, "subjects")
		if len(subjects) != 1 {
			t.Fatalf("%s subjects %v, want one", kind, subjects)
		}
		subj, _ := subjects[0].(map[string]any)
		if subj["kind"] != "ServiceAccount" || subj["name"] != sa || subj["namespace"] != "ingress-controller" {
			t.Errorf("%s subject %v: want ServiceAccount %s in ingress-controller (the chart's)", kind, subj, sa)
		}
	}
	for _, other := range d.Spec.Template.Spec.Containers {
		if other.Name == "haproxy-ingress" && len(other.Env) != 2 {
			t.Errorf("the controller container's env changed: %+v", other.Env)
		}
	}
}
