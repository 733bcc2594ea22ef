package kube

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Grant is one verb on one resource that a rendered overlay's Role or
// ClusterRole allows, in any of its API groups (a rule may name several
// groups that serve the same resource, as Events).
type Grant struct {
	Verb, Resource string
	Groups         []string
	Cluster        bool // granted by a ClusterRole
}

// Allows reports whether g allows the request `hapsuper check` names as
// subject: "list endpointslices.discovery.k8s.io", "get pods".
func (g Grant) Allows(subject string) bool {
	verb, res, _ := strings.Cut(subject, " ")
	res, group, _ := strings.Cut(res, ".")
	return verb == g.Verb && res == g.Resource && slices.Contains(g.Groups, group)
}

// String is the grant as "verb resource (groups)".
func (g Grant) String() string {
	return fmt.Sprintf("%s %s %q", g.Verb, g.Resource, g.Groups)
}

// Grants expands the rules of r's Roles and ClusterRoles into one Grant
// per verb and resource, sorted. Rules naming resourceNames or
// non-resource URLs are errors: deploy/ grants neither.
func (r Rendered) Grants() ([]Grant, error) {
	var out []Grant
	for _, kind := range []string{"Role", "ClusterRole"} {
		for _, obj := range r.Find(kind) {
			var role rbacv1.ClusterRole // a Role's fields are a subset
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &role); err != nil {
				return nil, fmt.Errorf("decode %s %s: %w", kind, obj.GetName(), err)
			}
			for _, rule := range role.Rules {
				if len(rule.ResourceNames) > 0 || len(rule.NonResourceURLs) > 0 {
					return nil, fmt.Errorf("%s %s: a rule with resourceNames or nonResourceURLs: expand it here first", kind, obj.GetName())
				}
				for _, res := range rule.Resources {
					for _, v := range rule.Verbs {
						out = append(out, Grant{Verb: v, Resource: res, Groups: rule.APIGroups, Cluster: kind == "ClusterRole"})
					}
				}
			}
		}
	}
	slices.SortFunc(out, func(a, b Grant) int {
		return cmp.Or(strings.Compare(a.Resource, b.Resource), strings.Compare(a.Verb, b.Verb))
	})
	return out, nil
}
