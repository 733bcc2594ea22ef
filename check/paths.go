package check

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/hapsuper/hapsuper/drain"
	"github.com/hapsuper/hapsuper/routing"
	"github.com/hapsuper/hapsuper/routing/judge"
)

// pathRows shows the Services whose slices list the pod and every path a
// drain could not observe, as the observer judges them.
func pathRows(ctx context.Context, r *Report, client API, id routing.Identity, pod *corev1.Pod, window time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, 2*apiTimeout)
	defer cancel()
	sv, err := routing.SurveyPod(ctx, client, id, pod, window)
	if err != nil {
		fix := "check that the apiserver answers"
		if apierrors.IsForbidden(err) {
			fix = "grant list and watch on endpointslices and services (deploy/overlays/endpointslices/rbac.yaml)"
		}
		r.add(AreaPaths, "-", Fail, err.Error(), fix)
		return
	}
	if pod == nil {
		r.add(AreaPaths, "pod "+id.PodName, Warn, "the pod could not be read: its hostNetwork, hostPorts and readiness gates are unknown", "see the identity row")
	}
	for _, p := range sv.Paths {
		state := "routed here in the API"
		if p.Withdrawn {
			state = "withdrawn in the API already"
		}
		r.add(AreaPaths, p.Service+" ("+p.Family+")", OK, fmt.Sprintf("EndpointSlice %s lists the pod, %s: %s", strings.Join(p.Slices, ", "), state, p.Why), "")
	}
	if len(sv.Paths) == 0 {
		r.add(AreaPaths, "-", Warn, "no EndpointSlice of a Service kube-proxy programs lists the pod: a drain has nothing to observe and ends unverified",
			"check that a Service selects the pod and that the pod is Ready; if no Service routes to it, set --routing off")
	}
	for _, u := range sv.Unobserved {
		subject, detail, ok := strings.Cut(u, ": ")
		if !ok {
			subject, detail = "-", u
		}
		r.add(AreaPaths, subject, Warn, "not observed: "+detail+"; a drain ends unverified while it exists, the quiet period deciding",
			"remove the path if it is not meant; for a load balancer that targets pod IPs, set --lb-deregistration-delay")
	}
	for _, e := range sv.External {
		externalRows(r, e, id.NodeName)
	}
}

// externalRows show how a drain would judge the external path of a
// LoadBalancer Service with externalTrafficPolicy Local: whether the node's
// traffic has another ready pod to go to, the node's health check as the
// pod reaches it, and the balancer's window.
func externalRows(r *Report, e routing.SurveyExternal, node string) {
	subject := e.Service + " external"
	policy := "LoadBalancer, externalTrafficPolicy Local"
	switch {
	case e.OtherReadyOnNode:
		r.add(AreaPaths, subject, OK, fmt.Sprintf("%s; another ready pod runs on node %s: its external traffic goes there once this pod is not ready", policy, node), "")
		return
	case e.HealthCheckNodePort == 0:
		r.add(AreaPaths, subject, Warn, policy+"; no healthCheckNodePort: nothing tells a load balancer to stop sending to node "+node+", so a drain holds to the bound",
			"")
		return
	}
	r.add(AreaPaths, subject, OK, fmt.Sprintf("%s; this pod is node %s's only ready pod: a drain waits for the load balancer to mark the node down (healthCheckNodePort %d)",
		policy, node, e.HealthCheckNodePort), "")
	if e.Reachable {
		r.add(AreaPaths, subject+" health check", OK, fmt.Sprintf("%s reachable from the pod: %s", e.URL, e.Answer), "")
	} else {
		r.add(AreaPaths, subject+" health check", Warn, fmt.Sprintf("%s: %s; a drain cannot see the load balancer's check fail and holds to the bound", orDash(e.URL), e.Answer),
			"let the pod reach its node's health check port (NetworkPolicy egress to the node's address on the NodePort range; deploy/overlays/kube-proxy)")
	}
	if e.Window > 0 {
		r.add(AreaPaths, subject+" window", OK, fmt.Sprintf("%v from %s: a drain ends that long after the node's check fails, then on new-connection quiet", e.Window, e.WindowSource), "")
	} else {
		r.add(AreaPaths, subject+" window", Warn, e.WindowSource+"; a drain holds to the bound",
			"set --lb-health-check-window (deploy/README.md lists the providers' defaults)")
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// maxNodeRows bounds the rows of nodes whose kube-proxy answers; the nodes
// with a problem each get their own row.
const maxNodeRows = 10

// kubeProxyRows asks every node's kube-proxy healthz once.
func kubeProxyRows(ctx context.Context, r *Report, client API, port int) {
	ctx, cancel := context.WithTimeout(ctx, 2*apiTimeout)
	defer cancel()
	nodes, err := routing.ProbeKubeProxies(ctx, client, port)
	if err != nil {
		fix := "check that the apiserver answers"
		if apierrors.IsForbidden(err) {
			fix = "grant list on nodes (deploy/overlays/kube-proxy/nodes-rbac.yaml)"
		}
		r.add(AreaKubeProxy, "nodes", Fail, err.Error(), fix)
		return
	}
	if len(nodes) == 0 {
		r.add(AreaKubeProxy, "nodes", Warn, "no node listed", "check the cluster's nodes")
		return
	}
	var good []routing.NodeHealth
	for _, n := range nodes {
		if n.Err != "" {
			fix := fmt.Sprintf("let the pod reach TCP %d on the node (NetworkPolicy egress) and run kube-proxy 1.33 or later there: a drain reads this node unverified", port)
			switch {
			case n.Pending:
				fix = "check kube-proxy on the node: it accepted and did not answer, and a drain holds such a node pending until the bound"
			case n.Proxy.NoSync():
				fix = "nothing on this node proves a rule sync: drains read it unverified and end " + string(drain.ReasonUnverified) +
					" on the quiet period; set --routing endpointslices to say so (docs/routing.md, other service proxies)"
			case n.Proxy == judge.ProxyKubeProxyOld:
				fix = "run kube-proxy 1.33 or later (or a Calico or Antrea release built on its code) on the node: a drain reads this node unverified"
			}
			r.add(AreaKubeProxy, "node "+n.Node, Warn, n.Err, fix)
			continue
		}
		if unhealthy := unhealthyFamilies(n); unhealthy != "" {
			r.add(AreaKubeProxy, "node "+n.Node, Warn, fmt.Sprintf("healthz at %s: %s unhealthy (a change waits past kube-proxy's healthz timeout); %s", n.Addr, unhealthy, syncs(n)),
				"check kube-proxy's log on the node: a drain holds an unhealthy node pending")
			continue
		}
		good = append(good, n)
	}
	if len(good) <= maxNodeRows {
		for _, n := range good {
			r.add(AreaKubeProxy, "node "+n.Node, OK, fmt.Sprintf("healthz at %s answers as %s: %s", n.Addr, n.Proxy, syncs(n)), "")
		}
		return
	}
	oldest := good[0]
	for _, n := range good {
		if maxAge(n) > maxAge(oldest) {
			oldest = n
		}
	}
	r.add(AreaKubeProxy, fmt.Sprintf("%d nodes", len(good)), OK, fmt.Sprintf("healthz answers as %s, with per-family status; oldest last sync: node %s, %s", judge.ProxyKubeProxy, oldest.Node, syncs(oldest)), "")
}

func unhealthyFamilies(n routing.NodeHealth) string {
	var out []string
	for _, f := range n.Families {
		if !f.Healthy {
			out = append(out, f.Family)
		}
	}
	return strings.Join(out, ", ")
}

// syncs says each family's last sync age.
func syncs(n routing.NodeHealth) string {
	var out []string
	for _, f := range n.Families {
		out = append(out, fmt.Sprintf("%s last sync %v ago", f.Family, f.Age.Round(time.Millisecond)))
	}
	return strings.Join(out, ", ")
}

func maxAge(n routing.NodeHealth) time.Duration {
	var m time.Duration
	for _, f := range n.Families {
		m = max(m, f.Age)
	}
	return m
}
