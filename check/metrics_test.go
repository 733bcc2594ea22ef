package check

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
)

const kubeProxyMetricsBody = `kubeproxy_sync_proxy_rules_duration_seconds_sum{ip_family="IPv4"} 0.75
kubeproxy_sync_proxy_rules_duration_seconds_count{ip_family="IPv4"} 30
kubeproxy_sync_proxy_rules_endpoint_changes_pending 0
kubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family="IPv4"} 1.7648448012345679e+09
process_start_time_seconds 1.76484e+09
`

// With --kube-proxy-metrics-port, check reads every node's metrics once:
// OK when all answer, a WARN naming the nodes that do not (judged by
// healthz alone), a SKIP saying what is missed when the port is 0.
func TestRun_KubeProxyMetrics(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, kubeProxyMetricsBody) }))
	defer srv.Close()
	_, port, err := net.SplitHostPort(srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}

	c := newCluster(t)
	r := c.run(t, settings(t, gracefulCfg, "--routing", "kube-proxy", "--kube-proxy-healthz-port", c.healthzPort(t), "--kube-proxy-metrics-port", port))
	want(t, r, AreaKubeProxy, "metrics", OK, "answer on all 1 nodes")
	want(t, r, AreaKubeProxy, "metrics", OK, "the slowest mean sync is 25ms over 30 syncs (n1)")

	c = newCluster(t)
	c.objects = append(c.objects, node("n2", "127.0.0.2"))
	r = c.run(t, settings(t, gracefulCfg, "--routing", "kube-proxy", "--kube-proxy-healthz-port", c.healthzPort(t), "--kube-proxy-metrics-port", port))
	want(t, r, AreaKubeProxy, "metrics", Warn, "answer on 1 of 2 nodes; the others are judged by healthz alone: n2: metrics at 127.0.0.2:"+port)
	want(t, r, AreaKubeProxy, "metrics", Warn, "metricsBindAddress to 0.0.0.0:"+port)

	c = newCluster(t)
	r = c.run(t, c.kubeProxy(t, gracefulCfg))
	want(t, r, AreaKubeProxy, "metrics", Skip, "--kube-proxy-metrics-port 0")
}
