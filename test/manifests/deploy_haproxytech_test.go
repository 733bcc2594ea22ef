package manifests_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	"github.com/hapsuper/hapsuper/conf"
	"github.com/hapsuper/hapsuper/test/harness/kube"
)

// haproxytechDropIn is one of the drop-ins for HAProxy Technologies'
// controller images, with what its chart does, transcribed from the chart's
// templates and values (helm-charts, read 2026-12-04): the ClusterRole
// bound to the controller's ServiceAccount (the rules hapsuper could use),
// the grace period the chart sets (0: none, the pod gets Kubernetes'
// default), and the ServiceAccount of the README's release.
type haproxytechDropIn struct {
	dir            string
	chartGrace     int64
	clusterRole    []rbacv1.PolicyRule
	serviceAccount string
	namespace      string
}

var haproxytechDropIns = []haproxytechDropIn{
	{
		dir: "haproxytech-ingress", chartGrace: 60,
		// kubernetes-ingress chart 1.52.1, templates/clusterrole.yaml (the
		// rules of the groups hapsuper reads).
		clusterRole: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"configmaps", "endpoints", "nodes", "pods", "services", "namespaces", "events", "serviceaccounts"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"get", "list", "watch"}},
		},
		serviceAccount: "haproxy-kubernetes-ingress", namespace: "haproxy-controller",
	},
	{
		dir: "haproxy-unified-gateway", chartGrace: 0,
		// haproxy-unified-gateway chart 1.1.0, templates/clusterrole.yaml.
		clusterRole: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"configmaps", "endpoints", "nodes", "pods", "services", "namespaces", "events", "serviceaccounts"}, Verbs: []string{"get", "list", "watch", "create", "patch", "update"}},
			{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"get", "list", "watch"}},
		},
		serviceAccount: "haproxy-unified-gateway", namespace: "haproxy-unified-gateway",
	},
}

// kubernetesDefaultGrace is the pod's terminationGracePeriodSeconds when
// the spec sets none.
const kubernetesDefaultGrace = 30

// haproxytechValues is what the drop-ins' values.yaml set.
type haproxytechValues struct {
	Controller struct {
		Image struct {
			Repository string `json:"repository"`
			Tag        string `json:"tag"`
		} `json:"image"`
		TerminationGracePeriodSeconds *int64          `json:"terminationGracePeriodSeconds"`
		Lifecycle                     map[string]any  `json:"lifecycle"`
		ExtraEnvs                     []corev1.EnvVar `json:"extraEnvs"`
	} `json:"controller"`
}

// Each drop-in's values give the pod a grace period that hapsuper's equals
// (the chart's, or Kubernetes' default where the chart sets none), no
// preStop, the pod's addresses and node for routing, settings hapsuper
// accepts; and the chart's ClusterRole with hapsuper-rbac.yaml grant every
// request hapsuper's routing observation makes, bound to the chart's
// ServiceAccount.
func TestDeploy_HAProxyTechDropIns(t *testing.T) {
	// What hapsuper's routing observation needs: the kube-proxy overlay's
	// grants (test/k8s checks that they are all it uses).
	needed, err := kube.Render(t, filepath.Join(kube.DeployDir(t), "overlays", "kube-proxy")).Grants()
	if err != nil {
		t.Fatal(err)
	}
	if len(needed) == 0 {
		t.Fatal("the kube-proxy overlay grants nothing")
	}
	for _, di := range haproxytechDropIns {
		t.Run(di.dir, func(t *testing.T) {
			dir := filepath.Join(kube.DeployDir(t), di.dir)
			var v haproxytechValues
			readYAML(t, filepath.Join(dir, "values.yaml"), &v)
			c := v.Controller
			if c.Image.Repository == "" || c.Image.Tag == "" {
				t.Errorf("values.yaml sets no image (%q:%q): the drop-in's image must replace the chart's", c.Image.Repository, c.Image.Tag)
			}
			if len(c.Lifecycle) > 0 {
				t.Errorf("values.yaml sets lifecycle %v: no preStop hook with hapsuper", c.Lifecycle)
			}
			env := corev1.Container{Env: c.ExtraEnvs}
			s, err := conf.Parse(nil, hapsuperEnv(env))
			if err != nil {
				t.Fatalf("hapsuper refuses the values' settings: %v", err)
			}
			grace := int64(kubernetesDefaultGrace)
			switch {
			case c.TerminationGracePeriodSeconds != nil:
				grace = *c.TerminationGracePeriodSeconds
			case di.chartGrace != 0:
				grace = di.chartGrace
			}
			if time.Duration(grace)*time.Second != s.GracePeriod {
				t.Errorf("the pod's grace period is %d s, HAPSUPER_GRACE_PERIOD %v: want them equal", grace, s.GracePeriod)
			}
			if s.Routing != conf.RoutingKubeProxy {
				t.Errorf("routing %q, want kube-proxy", s.Routing)
			}
			refs := fieldRefs(env)
			for name, path := range map[string]string{"POD_IPS": "status.podIPs", "NODE_NAME": "spec.nodeName"} {
				if refs[name] != path {
					t.Errorf("extraEnvs %s from %q, want the downward API's %s (the chart sets POD_NAME and POD_NAMESPACE only)", name, refs[name], path)
				}
			}

			role, binding := readDropInRBAC(t, filepath.Join(dir, "hapsuper-rbac.yaml"))
			if binding.RoleRef.Name != role.Name || binding.RoleRef.Kind != "Role" {
				t.Errorf("RoleBinding %s binds %s %s, want Role %s", binding.Name, binding.RoleRef.Kind, binding.RoleRef.Name, role.Name)
			}
			if len(binding.Subjects) != 1 || binding.Subjects[0].Kind != "ServiceAccount" ||
				binding.Subjects[0].Name != di.serviceAccount || binding.Subjects[0].Namespace != di.namespace {
				t.Errorf("RoleBinding subjects %+v, want the chart's ServiceAccount %s/%s", binding.Subjects, di.namespace, di.serviceAccount)
			}
			for _, g := range needed {
				if !allows(di.clusterRole, g) && !allows(role.Rules, g) {
					t.Errorf("nothing grants %s, which deploy/overlays/kube-proxy grants hapsuper: add it to hapsuper-rbac.yaml", g)
				}
			}
		})
	}
}

// allows reports whether rules grant g's verb on its resource in one of
// its groups.
func allows(rules []rbacv1.PolicyRule, g kube.Grant) bool {
	for _, r := range rules {
		for _, group := range g.Groups {
			if has(r.APIGroups, group) && has(r.Resources, g.Resource) && has(r.Verbs, g.Verb) {
				return true
			}
		}
	}
	return false
}

func has(list []string, s string) bool {
	for _, x := range list {
		if x == s || x == "*" {
			return true
		}
	}
	return false
}

func readYAML(t *testing.T, path string, into any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, into); err != nil {
		t.Fatalf("parse %s: %v", path, err)
	}
}

// readDropInRBAC reads hapsuper-rbac.yaml: one Role and one RoleBinding.
func readDropInRBAC(t *testing.T, path string) (rbacv1.Role, rbacv1.RoleBinding) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var role rbacv1.Role
	var binding rbacv1.RoleBinding
	for _, doc := range strings.Split(string(b), "\n---\n") {
		var meta struct {
			Kind string `json:"kind"`
		}
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			t.Fatalf("parse %s: %v", path, err)
		}
		switch meta.Kind {
		case "Role":
			readInto(t, path, doc, &role)
		case "RoleBinding":
			readInto(t, path, doc, &binding)
		default:
			t.Errorf("%s holds a %q: want a Role and a RoleBinding only (the chart's ClusterRole grants the rest)", path, meta.Kind)
		}
	}
	if role.Name == "" || binding.Name == "" {
		t.Fatalf("%s: want a Role and a RoleBinding", path)
	}
	return role, binding
}

func readInto(t *testing.T, path, doc string, into any) {
	t.Helper()
	if err := yaml.UnmarshalStrict([]byte(doc), into); err != nil {
		t.Fatalf("parse %s: %v", path, err)
	}
}
