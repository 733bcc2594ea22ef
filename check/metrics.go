package check

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/hapsuper/hapsuper/routing"
)

// kubeProxyMetricsRows reads every node's kube-proxy metrics once, with
// --kube-proxy-metrics-port, and says what hapsuper gains from them.
func kubeProxyMetricsRows(ctx context.Context, r *Report, client API, port int) {
	const name = "metrics"
	if port == 0 {
		r.add(AreaKubeProxy, name, Skip, "not read (--kube-proxy-metrics-port 0): drains judge kube-proxy by healthz alone, which cannot tell a restarted kube-proxy's start stamp from a sync",
			"")
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 2*apiTimeout)
	defer cancel()
	nodes, err := routing.ProbeKubeProxyMetrics(ctx, client, port)
	if err != nil {
		r.add(AreaKubeProxy, name, Fail, err.Error(), "check that the apiserver answers")
		return
	}
	var answered int
	var failed []string
	var slowest routing.NodeMetrics
	for _, n := range nodes {
		switch {
		case n.Err != "":
			failed = append(failed, n.Node+": "+n.Err)
		case len(n.Synced) == 0 || !n.HasPending:
			failed = append(failed, fmt.Sprintf("%s: metrics at %s lack the sync timestamp or the pending changes (kube-proxy before its first sync, or not kube-proxy)", n.Node, n.Addr))
		default:
			answered++
			if n.MeanSync > slowest.MeanSync {
				slowest = n
			}
		}
	}
	gain := "a healthz stamp that equals a successful sync's timestamp is a sync even after a restart, a new process start is a restart without a failed poll, no pending change after the change confirms with the next sync, and each sync's duration is measured (D is raised on a node whose syncs take longer)"
	if slowest.Syncs > 0 {
		gain += fmt.Sprintf("; the slowest mean sync is %v over %d syncs (%s)", slowest.MeanSync.Round(time.Millisecond), slowest.Syncs, slowest.Node)
	}
	if len(failed) == 0 {
		r.add(AreaKubeProxy, name, OK, fmt.Sprintf("kube-proxy metrics at port %d answer on all %d nodes: %s", port, answered, gain), "")
		return
	}
	shown := failed
	if len(shown) > maxNodeRows {
		shown = append(shown[:maxNodeRows:maxNodeRows], fmt.Sprintf("and %d more", len(failed)-maxNodeRows))
	}
	r.add(AreaKubeProxy, name, Warn, fmt.Sprintf("kube-proxy metrics at port %d answer on %d of %d nodes; the others are judged by healthz alone: %s", port, answered, len(nodes), strings.Join(shown, "; ")),
		"set kube-proxy's metricsBindAddress to 0.0.0.0:"+fmt.Sprint(port)+" (its default, 127.0.0.1, is out of a pod's reach) and let the pod reach that port on the nodes, or set --kube-proxy-metrics-port 0")
}
