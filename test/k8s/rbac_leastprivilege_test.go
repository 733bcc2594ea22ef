package k8s_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

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
	// allowedIn lists the routing modes whose grants allow it.
	allowedIn []string
}

const (
	ownNS   = "own"
	otherNS = "other"
)

var (
	routingModes = []string{"endpointslices", "kube-proxy"}
	kubeProxy    = []string{"kube-proxy"}
)

// leastPrivilege is what each mode must allow, and a sample of what it
// must not: reading secrets or config, changing pods or routing, reaching
// into pods, minting tokens, other namespaces, more of Nodes than a list.
var leastPrivilege = []access{
	// Allowed: what routing observation needs (DESIGN "Modes").
	{"list", "discovery.k8s.io", "endpointslices", "", ownNS, routingModes},
	{"watch", "discovery.k8s.io", "endpointslices", "", ownNS, routingModes},
	{"list", "", "services", "", ownNS, routingModes},
	{"watch", "", "services", "", ownNS, routingModes},
	{"get", "", "pods", "", ownNS, routingModes},
	{"watch", "", "pods", "", ownNS, routingModes},
	{"create", "", "events", "", ownNS, routingModes},
	{"create", "events.k8s.io", "events", "", ownNS, routingModes},
	{"list", "", "nodes", "", "", kubeProxy},

	// Denied in every mode.
	{"get", "", "secrets", "", ownNS, nil},
	{"list", "", "secrets", "", ownNS, nil},
	{"watch", "", "secrets", "", ownNS, nil},
	{"get", "", "configmaps", "", ownNS, nil},
	{"list", "", "configmaps", "", ownNS, nil},
	{"list", "", "pods", "", ownNS, nil},
	{"create", "", "pods", "", ownNS, nil},
	{"delete", "", "pods", "", ownNS, nil},
	{"patch", "", "pods", "", ownNS, nil},
	{"update", "", "pods", "status", ownNS, nil},
	{"create", "", "pods", "exec", ownNS, nil},
	{"get", "", "pods", "log", ownNS, nil},
	{"create", "", "pods", "eviction", ownNS, nil},
	{"get", "discovery.k8s.io", "endpointslices", "", ownNS, nil},
	{"create", "discovery.k8s.io", "endpointslices", "", ownNS, nil},
	{"update", "discovery.k8s.io", "endpointslices", "", ownNS, nil},
	{"delete", "discovery.k8s.io", "endpointslices", "", ownNS, nil},
	{"get", "", "services", "", ownNS, nil},
	{"update", "", "services", "", ownNS, nil},
	{"patch", "", "services", "", ownNS, nil},
	{"delete", "", "services", "", ownNS, nil},
	{"update", "", "events", "", ownNS, nil},
	{"create", "", "serviceaccounts", "token", ownNS, nil},
	{"create", "rbac.authorization.k8s.io", "rolebindings", "", ownNS, nil},
	{"get", "", "nodes", "", "", nil},
	{"watch", "", "nodes", "", "", nil},
	{"patch", "", "nodes", "", "", nil},
	{"get", "", "nodes", "proxy", "", nil},
	{"list", "discovery.k8s.io", "endpointslices", "", otherNS, nil},
	{"list", "", "services", "", otherNS, nil},
	{"get", "", "pods", "", otherNS, nil},
	{"create", "", "events", "", otherNS, nil},
	{"list", "discovery.k8s.io", "endpointslices", "", "", nil}, // every namespace
	{"list", "", "services", "", "", nil},
}

// Each mode's RBAC, applied for real in its own namespace (as an
// operator's kustomization moves it), grants hapsuper's service account
// exactly the table's allowed requests: the SubjectAccessReviews ask the
// real RBAC authorizer as system:serviceaccount:<ns>:hapsuper with the
// groups a token of that account carries. Mode off grants nothing.
func TestRBAC_LeastPrivilege(t *testing.T) {
	h := k8stest.Start(t, k8stest.Options{Nodes: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	a := newApplier(t, h)
	createNamespace(ctx, t, h, "elsewhere")

	for _, mode := range routingOverlays {
		t.Run(mode, func(t *testing.T) {
			ns := "rbac-" + mode
			createNamespace(ctx, t, h, ns)
			r := renderIn(t, filepath.Join("overlays", mode), ns, "")
			var applied []string
			for _, obj := range r.Objects {
				switch obj.GetKind() {
				case "ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding":
					if err := a.apply(ctx, obj, false); err != nil {
						t.Fatal(err)
					}
					applied = append(applied, obj.GetKind()+"/"+obj.GetName())
				}
			}
			t.Logf("applied: %v", applied)

			user := fmt.Sprintf("system:serviceaccount:%s:hapsuper", ns)
			rows := []string{fmt.Sprintf("%-8s %-40s %-20s %-8s %s", "verb", "resource", "namespace", "want", "got")}
			// Allowed rows first, each awaited (bounded): the RBAC
			// authorizer reads bindings from an informer, a few
			// milliseconds behind the apply. Once they pass, the denials
			// are read from an up-to-date cache.
			for _, allowedFirst := range []bool{true, false} {
				for _, acc := range leastPrivilege {
					want := slices.Contains(acc.allowedIn, mode)
					if want != allowedFirst {
						continue
					}
					target := acc.namespace(ns)
					got, reason, err := reviewUntil(ctx, h, user, ns, acc, target, want)
					if err != nil {
						t.Fatal(err)
					}
					mark := ""
					if got != want {
						mark = "  <-- WRONG " + reason
						t.Errorf("%s %s in %q as %s: allowed=%v, want %v (%s)", acc.verb, acc.resourceName(), target, user, got, want, reason)
					}
					rows = append(rows, fmt.Sprintf("%-8s %-40s %-20s %-8s %v%s", acc.verb, acc.resourceName(), orCluster(target), allowWord(want), allowWord(got), mark))
				}
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
