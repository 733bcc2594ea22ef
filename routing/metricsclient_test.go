package routing

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	discovery "k8s.io/api/discovery/v1"

	"github.com/hapsuper/hapsuper/routing/judge"
)

// kubeProxyMetrics is the shape of kube-proxy 1.37's /metrics around the
// samples read (families sorted by name, as client_golang gathers them).
const kubeProxyMetrics = `# HELP go_goroutines Number of goroutines that currently exist.
# TYPE go_goroutines gauge
go_goroutines 71
# HELP kubeproxy_sync_proxy_rules_duration_seconds [ALPHA] SyncProxyRules latency in seconds
# TYPE kubeproxy_sync_proxy_rules_duration_seconds histogram
kubeproxy_sync_proxy_rules_duration_seconds_bucket{ip_family="IPv4",le="0.001"} 0
kubeproxy_sync_proxy_rules_duration_seconds_bucket{ip_family="IPv4",le="+Inf"} 17
kubeproxy_sync_proxy_rules_duration_seconds_sum{ip_family="IPv4"} 0.52
kubeproxy_sync_proxy_rules_duration_seconds_count{ip_family="IPv4"} 17
kubeproxy_sync_proxy_rules_duration_seconds_bucket{ip_family="IPv6",le="+Inf"} 16
kubeproxy_sync_proxy_rules_duration_seconds_sum{ip_family="IPv6"} 0.4375
kubeproxy_sync_proxy_rules_duration_seconds_count{ip_family="IPv6"} 16
# HELP kubeproxy_sync_proxy_rules_endpoint_changes_pending [ALPHA] Pending proxy rules Endpoint changes
# TYPE kubeproxy_sync_proxy_rules_endpoint_changes_pending gauge
kubeproxy_sync_proxy_rules_endpoint_changes_pending 0
# HELP kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds [ALPHA] The last time a sync of proxy rules was queued
# TYPE kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds gauge
kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds{ip_family="IPv4"} 1.7648448011e+09
kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds{ip_family="IPv6"} 0
# HELP kubeproxy_sync_proxy_rules_last_timestamp_seconds [ALPHA] The last time proxy rules were successfully synced
# TYPE kubeproxy_sync_proxy_rules_last_timestamp_seconds gauge
kubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family="IPv4"} 1.7648448012345679e+09
kubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family="IPv6"} 1.76484480125e+09
# HELP process_start_time_seconds Start time of the process since unix epoch in seconds.
# TYPE process_start_time_seconds gauge
process_start_time_seconds 1.76484e+09
# HELP process_virtual_memory_bytes Virtual memory size in bytes.
process_virtual_memory_bytes 1.3e+09
`

func TestParseMetrics(t *testing.T) {
	m, err := parseMetrics(strings.NewReader(kubeProxyMetrics))
	if err != nil {
		t.Fatal(err)
	}
	want4 := time.Unix(1764844801, 234567900).UTC()
	if d := m.Synced[discovery.AddressTypeIPv4].Sub(want4); d < -time.Microsecond || d > time.Microsecond {
		t.Errorf("IPv4 sync %v, want %v", m.Synced[discovery.AddressTypeIPv4], want4)
	}
	if got, want := m.Synced[discovery.AddressTypeIPv6], time.Unix(1764844801, 250000000).UTC(); !got.Equal(want) {
		t.Errorf("IPv6 sync %v, want %v", got, want)
	}
	if got, want := m.Queued[discovery.AddressTypeIPv4], time.Unix(1764844801, 100000000).UTC(); got.Sub(want) < -time.Microsecond || got.Sub(want) > time.Microsecond {
		t.Errorf("IPv4 queued %v, want %v", got, want)
	}
	if q, ok := m.Queued[discovery.AddressTypeIPv6]; ok {
		t.Errorf("IPv6 queued %v, want none: its gauge is 0", q)
	}
	if !m.ProcessStart.Equal(time.Unix(1764840000, 0)) {
		t.Errorf("process start %v", m.ProcessStart)
	}
	if !m.HasPending || m.Pending != 0 {
		t.Errorf("pending %d (%v), want 0", m.Pending, m.HasPending)
	}
	if got, want := m.Durations[discovery.AddressTypeIPv4], (judge.SyncDurations{Count: 17, Sum: 0.52}); got != want {
		t.Errorf("IPv4 sync durations %+v, want %+v", got, want)
	}
	if got, want := m.Durations[discovery.AddressTypeIPv6], (judge.SyncDurations{Count: 16, Sum: 0.4375}); got != want {
		t.Errorf("IPv6 sync durations %+v, want %+v", got, want)
	}

	pending := strings.Replace(kubeProxyMetrics, "changes_pending 0", "changes_pending 3", 1)
	if m, err := parseMetrics(strings.NewReader(pending)); err != nil || m.Pending != 3 {
		t.Errorf("pending %d, %v; want 3", m.Pending, err)
	}
	// A process that has not synced yet has no timestamp sample.
	fresh := strings.NewReplacer(`kubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family="IPv4"} 1.7648448012345679e+09`, "",
		`kubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family="IPv6"} 1.76484480125e+09`, "").Replace(kubeProxyMetrics)
	if m, err := parseMetrics(strings.NewReader(fresh)); err != nil || len(m.Synced) != 0 {
		t.Errorf("synced %v, %v; want none", m.Synced, err)
	}
}

func TestParseMetricsRefuses(t *testing.T) {
	for name, body := range map[string]string{
		"no process start": strings.Replace(kubeProxyMetrics, "process_start_time_seconds 1.76484e+09", "", 1),
		"bad start":        strings.Replace(kubeProxyMetrics, "process_start_time_seconds 1.76484e+09", "process_start_time_seconds NaN", 1),
		"bad pending":      strings.Replace(kubeProxyMetrics, "changes_pending 0", "changes_pending -1", 1),
		"bad stamp":        strings.Replace(kubeProxyMetrics, "1.76484480125e+09", "+Inf", 1),
		"bad count":        strings.Replace(kubeProxyMetrics, `_count{ip_family="IPv4"} 17`, `_count{ip_family="IPv4"} 1.5`, 1),
		"bad sum":          strings.Replace(kubeProxyMetrics, `_sum{ip_family="IPv4"} 0.52`, `_sum{ip_family="IPv4"} NaN`, 1),
		"html":             "<html><body>404</body></html>",
	} {
		if _, err := parseMetrics(strings.NewReader(body)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// A line longer than maxMetricsLine is skipped, not kept in memory, and
// the samples after it are read.
func TestParseMetricsLongLine(t *testing.T) {
	body := "# HELP x " + strings.Repeat("y", 3*maxMetricsLine) + "\n" + kubeProxyMetrics
	m, err := parseMetrics(strings.NewReader(body))
	if err != nil || m.ProcessStart.IsZero() {
		t.Fatalf("%v, %v", m, err)
	}
}

func FuzzParseMetrics(f *testing.F) {
	f.Add([]byte(kubeProxyMetrics))
	f.Add([]byte("process_start_time_seconds 1\n"))
	f.Add([]byte(`kubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family="IPv4",x="}"} 5` + "\nprocess_start_time_seconds 2"))
	f.Fuzz(func(t *testing.T, body []byte) {
		m, err := parseMetrics(strings.NewReader(string(body)))
		if err != nil {
			return
		}
		if m.ProcessStart.IsZero() {
			t.Fatal("accepted without a process start")
		}
		for fam := range m.Synced {
			if fam != discovery.AddressTypeIPv4 && fam != discovery.AddressTypeIPv6 {
				t.Fatalf("family %q", fam)
			}
		}
		if m.Pending < 0 {
			t.Fatalf("pending %d", m.Pending)
		}
	})
}

func testMetricsClient() *metricsClient {
	var d net.Dialer
	return &metricsClient{dial: d.DialContext, dialTimeout: time.Second, now: time.Now}
}

func TestMetricsClientFetch(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprint(w, kubeProxyMetrics)
	}))
	defer srv.Close()
	m, sent, err := testMetricsClient().fetch(context.Background(), srv.Listener.Addr().String(), 5*time.Second)
	if err != nil || sent.IsZero() || m.ProcessStart.IsZero() || len(m.Synced) != 2 {
		t.Fatalf("%+v %v %v", m, sent, err)
	}
}

// An endless answer is cut at maxMetricsAnswer; a silent one at the timeout.
func TestMetricsClientBounds(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		line := []byte("go_gc_x 1\n")
		for range maxMetricsAnswer/len(line) + 10 {
			if _, err := w.Write(line); err != nil {
				return
			}
		}
	}))
	defer srv.Close()
	_, _, err := testMetricsClient().fetch(context.Background(), srv.Listener.Addr().String(), 10*time.Second)
	if err == nil || !strings.Contains(err.Error(), "longer than") {
		t.Errorf("endless answer: %v", err)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() { // accepts, never answers; ends when the listener closes
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	start := time.Now()
	_, _, err = testMetricsClient().fetch(context.Background(), ln.Addr().String(), 300*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "did not answer within") {
		t.Errorf("silent node: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("silent node held the fetch %v", d)
	}
}
