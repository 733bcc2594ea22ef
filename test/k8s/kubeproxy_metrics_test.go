package k8s_test

import (
	"io"
	"net/netip"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/hapsuper/hapsuper/test/k8s/k8stest"
)

// The metrics witness measures each sync by the growth of kube-proxy's
// kubeproxy_sync_proxy_rules_duration_seconds _count and _sum between two
// answers, per family (routing/metricsclient.go reads them by their
// ip_family label): the real kube-proxy serves them in that shape, and
// they count its syncs.
func TestKubeProxy_SyncDurationHistogram(t *testing.T) {
	h := k8stest.Start(t, k8stest.Options{Nodes: 1, KubeProxyMetrics: true})
	n := h.Nodes()[0]
	url := "http://" + netip.AddrPortFrom(n.IP, k8stest.MetricsPort).String() + "/metrics"
	count := regexp.MustCompile(`(?m)^kubeproxy_sync_proxy_rules_duration_seconds_count\{ip_family="IPv4"\} (\S+)$`)
	sum := regexp.MustCompile(`(?m)^kubeproxy_sync_proxy_rules_duration_seconds_sum\{ip_family="IPv4"\} (\S+)$`)
	var body []byte
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		resp, err := n.HTTPClient(5 * time.Second).Get(url)
		if err == nil {
			body, err = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		if err == nil && count.Match(body) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no IPv4 sync-duration count at %s within 30 s (%v):\n%.2000s", url, err, body)
		}
	}
	c, err := strconv.ParseFloat(string(count.FindSubmatch(body)[1]), 64)
	if err != nil || c < 1 {
		t.Fatalf("IPv4 sync count %q: want at least 1 sync (%v)", count.FindSubmatch(body)[1], err)
	}
	m := sum.FindSubmatch(body)
	if m == nil {
		t.Fatalf("no IPv4 sync-duration sum beside its count")
	}
	s, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil || s <= 0 || s/c > 30 {
		t.Fatalf("IPv4 sync-duration sum %q over %v syncs: want a positive number of seconds (%v)", m[1], c, err)
	}
	t.Logf("node1 kube-proxy: %v IPv4 syncs, %v s in all (mean %v)", c, s, time.Duration(s/c*float64(time.Second)).Round(time.Microsecond))
}
