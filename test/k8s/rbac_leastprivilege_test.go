package k8s_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hapsuper/hapsuper/test/harness/kube"
	"github.com/hapsuper/hapsuper/test/k8s/k8stest"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// access is one request hapsuper's service account might make.
type access struct {
	verb, group, resource, subresource string
	// ns: "own" (the install's namespace), "other" (another one), or ""
	// (cluster-scoped, or every namespace).
	ns string
}

const (
	ownNS   = "own"
	otherNS = "other"
)

// denied is a sample of what no mode may allow: reading secrets or
// config, changing pods or routing, reaching into pods, minting tokens,
// other namespaces, more of Nodes than a list. What a mode must allow is
// not written here: it is its overlay's Roles, rendered (granted), which
// TestCheck_RealCluster holds equal to what hapsuper check asks for.
var denied = []access{
	{"get", "", "secrets", "", ownNS},
	{"list", "", "secrets", "", ownNS},
	{"watch", "", "secrets", "", ownNS},
	{"get", "", "configmaps", "", ownNS},
	{"list", "", "configmaps", "", ownNS},
	{"list", "", "pods", "", ownNS},
	{"create", "", "pods", "", ownNS},
	{"delete", "", "pods", "", ownNS},
	{"patch", "", "pods", "", ownNS},
	{"update", "", "pods", "status", ownNS},
	{"create", "", "pods", "exec", ownNS},
	{"get", "", "pods", "log", ownNS},
	{"create", "", "pods", "eviction", ownNS},
	{"get", "discovery.k8s.io", "endpointslices", "", ownNS},
	{"create", "discovery.k8s.io", "endpointslices", "", ownNS},
	{"update", "discovery.k8s.io", "endpointslices", "", ownNS},
	{"delete", "discovery.k8s.io", "endpointslices", "", ownNS},
	{"get", "", "services", "", ownNS},
	{"update", "", "services", "", ownNS},
	{"patch", "", "services", "", ownNS},
	{"delete", "", "services", "", ownNS},
	{"update", "", "events", "", ownNS},
	{"create", "", "events", "", ownNS}, // Events go through events.k8s.io only
	{"create", "", "serviceaccounts", "token", ownNS},
	{"create", "rbac.authorization.k8s.io", "rolebindings", "", ownNS},
	{"get", "", "nodes", "", ""},
	{"watch", "", "nodes", "", ""},
	{"patch", "", "nodes", "", ""},
	{"get", "", "nodes", "proxy", ""},
	{"list", "discovery.k8s.io", "endpointslices", "", otherNS},
	{"list", "", "services", "", otherNS},
	{"get", "", "pods", "", otherNS},
	{"create", "", "events", "", otherNS},
	{"list", "discovery.k8s.io", "endpointslices", "", ""}, // every namespace
	{"list", "", "services", "", ""},
}

// granted is what mode's overlay, rendered, grants: its Roles' rules in
// the install's namespace, its ClusterRoles' in the cluster.
func granted(t *testing.T, mode string) []access {
	t.Helper()
	gs, err := kube.RenderIn(t, filepath.Join("overlays", mode), "hapsuper", "").Grants()
	if err != nil {
		t.Fatal(err)
	}
	var out []access
	for _, g := range gs {
		for _, group := range g.Groups {
			acc := access{verb: g.Verb, group: group, resource: g.Resource, ns: ownNS}
			if g.Cluster {
				acc.ns = ""
			}
			out = append(out, acc)
		}
	}
	return out
}

// Each mode's RBAC, applied for real in its own namespace (as an
// operator's kustomization moves it), grants hapsuper's service account
// what its rendered Roles say and nothing of the denied sample, of the
// other modes' grants, or of its own in another namespace: the
// SubjectAccessReviews ask the real RBAC authorizer as
// system:serviceaccount:<ns>:hapsuper with the groups a token of that
// account carries. Mode off grants nothing.
func TestRBAC_LeastPrivilege(t *testing.T) {
	h := k8stest.Start(t, k8stest.Options{Nodes: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	a := kube.NewApplier(t, h)
	createNamespace(ctx, t, h, "elsewhere")
	grants := map[string][]access{}
	for _, mode := range kube.RoutingOverlays {
		grants[mode] = granted(t, mode)
	}
	if len(grants["off"]) != 0 || len(grants["endpointslices"]) == 0 || len(grants["kube-proxy"]) <= len(grants["endpointslices"]) {
		t.Fatalf("rendered grants %v: want none for off, some for endpointslices, more for kube-proxy", grants)
	}

	for _, mode := range kube.RoutingOverlays {
		t.Run(mode, func(t *testing.T) {
			ns := "rbac-" + mode
			createNamespace(ctx, t, h, ns)
			applied, err := a.ApplyRBAC(ctx, kube.RenderIn(t, filepath.Join("overlays", mode), ns, ""))
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("applied: %v", applied)
			// Allowed rows first, each awaited (bounded): the RBAC
			// authorizer reads bindings from an informer, a few
			// milliseconds behind the apply. Once they pass, the denials
			// are read from an up-to-date cache.
			want := map[access]bool{}
			for _, acc := range grants[mode] {
				want[acc] = true
			}
			reviews := append([]access(nil), grants[mode]...)
			for _, acc := range append(append(append([]access(nil), denied...), grants["endpointslices"]...), grants["kube-proxy"]...) {
				if !want[acc] {
					reviews = append(reviews, acc)
				}
			}
			for _, acc := range grants[mode] {
				if acc.ns == ownNS {
					acc.ns = otherNS
					reviews = append(reviews, acc)
				}
			}

			user := fmt.Sprintf("system:serviceaccount:%s:hapsuper", ns)
			rows := []string{fmt.Sprintf("%-8s %-40s %-20s %-8s %s", "verb", "resource", "namespace", "want", "got")}
			seen := map[access]bool{}
			for _, acc := range reviews {
				if seen[acc] {
					continue
				}
				seen[acc] = true
				target := acc.namespace(ns)
				got, reason, err := reviewUntil(ctx, h, user, ns, acc, target, want[acc])
				if err != nil {
					t.Fatal(err)
				}
				mark := ""
				if got != want[acc] {
					mark = "  <-- WRONG " + reason
					t.Errorf("%s %s in %q as %s: allowed=%v, want %v (%s)", acc.verb, acc.resourceName(), target, user, got, want[acc], reason)
				}
				rows = append(rows, fmt.Sprintf("%-8s %-40s %-20s %-8s %v%s", acc.verb, acc.resourceName(), orCluster(target), allowWord(want[acc]), allowWord(got), mark))
			}
			t.Logf("mode %s, %s:\n%s", mode, user, strings.Join(rows, "\n"))
		})
	}
}

// namespace is the review's namespace for the install's namespace ns.
func (acc access) namespace(ns string) string {
	switch acc.ns {
	case ownNS:
		return ns
	case otherNS:
		return "elsewhere"
	}
	return ""
}

func (acc access) resourceName() string {
	r := acc.resource
	if acc.subresource != "" {
		r += "/" + acc.subresource
	}
	if acc.group != "" {
		r += "." + acc.group
	}
	return r
}

// reviewUntil asks whether user may make acc in target; when the answer
// differs from want it asks again until 5 s have passed, so that a binding
// still on its way to the authorizer's cache is not reported as missing.
func reviewUntil(ctx context.Context, h *k8stest.Harness, user, ns string, acc access, target string, want bool) (bool, string, error) {
	deadline := time.Now().Add(5 * time.Second)
	for {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:   user,
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: target, Verb: acc.verb, Group: acc.group, Resource: acc.resource, Subresource: acc.subresource,
			},
		}}
		got, err := h.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
		if err != nil {
			return false, "", fmt.Errorf("review %s %s for %s: %w", acc.verb, acc.resourceName(), user, err)
		}
		allowed := got.Status.Allowed && !got.Status.Denied
		if allowed == want || !want || time.Now().After(deadline) {
			return allowed, got.Status.Reason, nil
		}
		select {
		case <-ctx.Done():
			return allowed, got.Status.Reason, nil
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func allowWord(b bool) string {
	if b {
		return "allow"
	}
	return "deny"
}

func orCluster(ns string) string {
	if ns == "" {
		return "(cluster/all)"
	}
	return ns
}
