package routing

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/hapsuper/hapsuper/drain"
)

// fakeMetrics is a node's kube-proxy /metrics beside its fakeProxy: the
// process started at start (our clock), its successful syncs those of the
// fakeProxy (each stamped 20 µs after healthz's stamp, as kube-proxy sets
// the two one after the other), no change pending.
type fakeMetrics struct {
	p     *fakeProxy
	start time.Time
}

func (f *fakeMetrics) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.p.mu.Lock()
	syncs, start := append([]time.Time(nil), f.p.syncs...), f.start
	f.p.mu.Unlock()
	now := f.p.clk.Now()
	fmt.Fprintln(w, "kubeproxy_sync_proxy_rules_endpoint_changes_pending 0")
	var last time.Time
	for _, s := range syncs {
		if !s.After(now) {
			last = s
		}
	}
	if !last.IsZero() {
		fmt.Fprintf(w, "kubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family=\"IPv4\"} %.6f\n", seconds(last.Add(20*time.Microsecond)))
	}
	fmt.Fprintf(w, "process_start_time_seconds %.2f\n", seconds(start))
}

func seconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

// serveMetrics is n2's metrics (the scenario serves them with
// cfg.MetricsPort), its process started at start.
func (s *scenario) serveMetrics(start time.Time) *fakeMetrics {
	m := s.metrics["n2"]
	m.p.set(func(*fakeProxy) { m.start = start })
	return m
}

// kube-proxy killed after the withdrawal and restarted: its first sync
// (R+1300ms) is the first lastUpdated healthz shows after the failed poll.
// Healthz alone cannot tell it from a start stamp and waits for a later
// sync (an hour away in a quiet cluster); the new process's metrics hold
// it as a successful sync, and the verdict names that witness.
func TestConfirmMetricsWitnessAfterRestart(t *testing.T) {
	for _, metrics := range []bool{false, true} {
		t.Run(fmt.Sprintf("metrics %v", metrics), func(t *testing.T) {
			cfg := Config{}
			if metrics {
				cfg.MetricsPort = 10249
			}
			s := newScenario(t, cfg)
			var m *fakeMetrics
			if metrics {
				m = s.serveMetrics(s.R.Add(-time.Hour))
			}
			s.syncsAt("n2", -5*time.Second)
			expect(t, s.round(100*ms), drain.RoutingPending, "no sync since the change")
			addr := s.routes["10.0.0.2:10256"]
			delete(s.routes, "10.0.0.2:10256") // killed: the port refuses
			s.http.CloseIdleConnections()
			expect(t, s.round(600*ms), drain.RoutingPending, "last poll failed")
			s.routes["10.0.0.2:10256"] = addr
			if metrics {
				m.p.set(func(*fakeProxy) { m.start = s.R.Add(900 * ms) })
			}
			s.syncsAt("n2", -5*time.Second, 1300*ms) // the new instance's first sync
			got := s.round(1400 * ms)
			if !metrics {
				expect(t, got, drain.RoutingPending, "may be a restarted kube-proxy's start")
				return
			}
			expect(t, got, drain.RoutingWithdrawn, "metrics on 1: n2")
		})
	}
}

// The metrics of a process other than the one healthz answers for (started
// after healthz's connection first answered) prove nothing.
func TestConfirmMetricsFromAnotherProcess(t *testing.T) {
	s := newLateScenario(t, Config{MetricsPort: 10249})
	m := s.serveMetrics(s.R.Add(-time.Hour))
	s.syncsAt("n2", -5*time.Second, 400*ms)
	m.p.set(func(*fakeProxy) { m.start = s.R.Add(time.Hour) })
	expect(t, s.round(500*ms), drain.RoutingPending, "first seen on a new connection")
}
