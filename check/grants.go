package check

import (
	"context"
	"fmt"

	authorizationv1 "k8s.io/api/authorization/v1"

	"github.com/hapsuper/hapsuper/routing"
)

// grants are the requests routing makes (routing.Grants).
var grants = routing.Grants

// grantRows asks, by SelfSubjectAccessReview, whether the credentials may
// make each request of the mode.
func grantRows(ctx context.Context, r *Report, client API, id routing.Identity, mode routing.Mode) {
	overlay := "deploy/overlays/endpointslices/rbac.yaml"
	for _, g := range grants {
		if g.KubeProxy && mode != routing.ModeKubeProxy {
			continue
		}
		if g.KubeProxy {
			overlay = "deploy/overlays/kube-proxy/nodes-rbac.yaml"
		}
		attrs := &authorizationv1.ResourceAttributes{Verb: g.Verb, Group: g.Group, Resource: g.Resource}
		where := "namespace " + id.Namespace
		if !g.Cluster {
			attrs.Namespace = id.Namespace
		} else {
			where = "the cluster"
		}
		if g.Own {
			attrs.Name = id.PodName
		}
		allowed, reason, err := review(ctx, client, attrs)
		switch {
		case err != nil:
			r.add(AreaGrants, g.String(), Fail, "cannot ask: "+err.Error(), "check that the apiserver answers SelfSubjectAccessReviews")
		case allowed:
			r.add(AreaGrants, g.String(), OK, "allowed in "+where+"; needed for "+g.Why, "")
		default:
			st := Fail
			if g.Optional {
				st = Warn
			}
			detail := "denied in " + where + "; needed for " + g.Why
			if g.Verb == "create" {
				detail = "denied in " + where + ": " + g.Why + " is not posted (the drain is unaffected)"
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
