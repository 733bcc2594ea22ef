package check

import (
	"context"
	"fmt"

	authorizationv1 "k8s.io/api/authorization/v1"

	"github.com/hapsuper/hapsuper/routing"
)

// grant is one request a routing mode makes (routing.Mode's docs;
// deploy/overlays/endpointslices/rbac.yaml and kube-proxy/nodes-rbac.yaml
// grant them).
type grant struct {
	verb, group, resource string
	own                   bool // on the pod itself: the review names it
	cluster               bool // cluster-scoped
	optional              bool // a drain works without it: WARN, not FAIL
	kubeProxy             bool // only ModeKubeProxy makes it
	why                   string
}

var grants = []grant{
	{verb: "list", group: "discovery.k8s.io", resource: "endpointslices", why: "the slices that list the pod"},
	{verb: "watch", group: "discovery.k8s.io", resource: "endpointslices", why: "the slices that list the pod"},
	{verb: "list", resource: "services", why: "each slice's Service"},
	{verb: "watch", resource: "services", why: "each slice's Service"},
	{verb: "get", resource: "pods", own: true, why: "the pod's grace period and paths"},
	{verb: "watch", resource: "pods", own: true, why: "the pod's deletion"},
	{verb: "create", group: "events.k8s.io", resource: "events", optional: true, why: "the Event that says how a drain ended"},
	{verb: "list", resource: "nodes", cluster: true, kubeProxy: true, why: "every node's kube-proxy address"},
}

func (g grant) String() string {
	r := g.resource
	if g.group != "" {
		r += "." + g.group
	}
	return g.verb + " " + r
}

// grantRows asks, by SelfSubjectAccessReview, whether the credentials may
// make each request of the mode.
func grantRows(ctx context.Context, r *Report, client API, id routing.Identity, mode routing.Mode) {
	overlay := "deploy/overlays/endpointslices/rbac.yaml"
	for _, g := range grants {
		if g.kubeProxy && mode != routing.ModeKubeProxy {
			continue
		}
		if g.kubeProxy {
			overlay = "deploy/overlays/kube-proxy/nodes-rbac.yaml"
		}
		attrs := &authorizationv1.ResourceAttributes{Verb: g.verb, Group: g.group, Resource: g.resource}
		where := "namespace " + id.Namespace
		if !g.cluster {
			attrs.Namespace = id.Namespace
		} else {
			where = "the cluster"
		}
		if g.own {
			attrs.Name = id.PodName
		}
		allowed, reason, err := review(ctx, client, attrs)
		switch {
		case err != nil:
			r.add(AreaGrants, g.String(), Fail, "cannot ask: "+err.Error(), "check that the apiserver answers SelfSubjectAccessReviews")
		case allowed:
			r.add(AreaGrants, g.String(), OK, "allowed in "+where+"; needed for "+g.why, "")
		default:
			st := Fail
			if g.optional {
				st = Warn
			}
			detail := "denied in " + where + "; needed for " + g.why
			if g.verb == "create" {
				detail = "denied in " + where + ": " + g.why + " is not posted (the drain is unaffected)"
			}
			if reason != "" {
				detail += " (" + reason + ")"
			}
			r.add(AreaGrants, g.String(), st, detail, fmt.Sprintf("grant %s to the pod's service account (%s)", g, overlay))
		}
	}
}

// review asks whether the client's own credentials may make the request.
func review(ctx context.Context, client API, attrs *authorizationv1.ResourceAttributes) (allowed bool, reason string, err error) {
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	sar := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: attrs}}
	got, err := client.CreateSelfSubjectAccessReview(ctx, sar)
	if err != nil {
		return false, "", err
	}
	return got.Status.Allowed && !got.Status.Denied, got.Status.Reason, nil
}
