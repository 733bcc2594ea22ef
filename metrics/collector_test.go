package metrics

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/hapsuper/hapsuper/drain"
	"github.com/hapsuper/hapsuper/status"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// at is t0 plus s seconds.
func at(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

// expectation is the hapsuper_ exposition expected for one snapshot, built
// from the few values that differ between phases.
type expectation struct {
	phase    drain.Phase
	reason   drain.Reason
	duration float64 // drain duration in seconds; < 0: no drain ended
	deadline string  // deadline_seconds value; "" when absent
	sessions int
	current  int
	old      int
	pending  int // routing_pending_nodes
	cliUp    int
	reloads  [3]int // ok, refused, failed
	late     int    // late_connections_total
}

func (e expectation) text() string {
	var b strings.Builder
	b.WriteString("# HELP hapsuper_phase 1 for the phase hapsuper is in, 0 for the others (starting, serving, draining, stopping, exited).\n# TYPE hapsuper_phase gauge\n")
	for _, p := range drain.Phases() {
		fmt.Fprintf(&b, "hapsuper_phase{phase=%q} %d\n", p, one(p == e.phase))
	}
	b.WriteString("# HELP hapsuper_drains_total Drains ended, by reason; a process drains at most once.\n# TYPE hapsuper_drains_total counter\n")
	for _, r := range drain.Reasons() {
		fmt.Fprintf(&b, "hapsuper_drains_total{reason=%q} %d\n", r, one(r == e.reason))
	}
	b.WriteString("# HELP hapsuper_drain_duration_seconds Time from the stop request to the soft stop, observed once when the drain ended.\n# TYPE hapsuper_drain_duration_seconds histogram\n")
	count, sum := 0, 0.0
	if e.duration >= 0 {
		count, sum = 1, e.duration
	}
	for _, le := range DrainBuckets {
		fmt.Fprintf(&b, "hapsuper_drain_duration_seconds_bucket{le=\"%g\"} %d\n", le, one(count == 1 && e.duration <= le))
	}
	fmt.Fprintf(&b, "hapsuper_drain_duration_seconds_bucket{le=\"+Inf\"} %d\nhapsuper_drain_duration_seconds_sum %g\nhapsuper_drain_duration_seconds_count %d\n", count, sum, count)
	fmt.Fprintf(&b, "# HELP hapsuper_late_connections_total New connections counted after the in-flight window of a withdrawn routing verdict: a path hapsuper does not observe sent them; above 0 the drain ends unverified.\n# TYPE hapsuper_late_connections_total counter\nhapsuper_late_connections_total %d\n", e.late)
	b.WriteString("# HELP hapsuper_reloads_total Reloads of HAProxy by result: ok (a new worker serves), refused (haproxy -c failed, nothing sent), failed (HAProxy did not load it; the old worker serves).\n# TYPE hapsuper_reloads_total counter\n")
	fmt.Fprintf(&b, "hapsuper_reloads_total{result=\"ok\"} %d\nhapsuper_reloads_total{result=\"refused\"} %d\nhapsuper_reloads_total{result=\"failed\"} %d\n", e.reloads[0], e.reloads[1], e.reloads[2])
	if e.deadline != "" {
		fmt.Fprintf(&b, "# HELP hapsuper_deadline_seconds Seconds left before the hard-stop deadline, negative past it; absent while no deadline is known.\n# TYPE hapsuper_deadline_seconds gauge\nhapsuper_deadline_seconds %s\n", e.deadline)
	}
	fmt.Fprintf(&b, "# HELP hapsuper_haproxy_sessions Current sessions summed over every HAProxy worker, old workers included, as last polled.\n# TYPE hapsuper_haproxy_sessions gauge\nhapsuper_haproxy_sessions %d\n", e.sessions)
	fmt.Fprintf(&b, "# HELP hapsuper_haproxy_workers HAProxy workers as last polled, by kind: current, or old (left by a reload).\n# TYPE hapsuper_haproxy_workers gauge\nhapsuper_haproxy_workers{kind=\"current\"} %d\nhapsuper_haproxy_workers{kind=\"old\"} %d\n", e.current, e.old)
	fmt.Fprintf(&b, "# HELP hapsuper_routing_pending_nodes Nodes whose kube-proxy has not yet confirmed the pod's withdrawal (kube-proxy mode, during a drain); 0 otherwise.\n# TYPE hapsuper_routing_pending_nodes gauge\nhapsuper_routing_pending_nodes %d\n", e.pending)
	fmt.Fprintf(&b, "# HELP hapsuper_master_cli_up 1 when the last poll of HAProxy's master CLI succeeded, 0 when it failed or none was made yet.\n# TYPE hapsuper_master_cli_up gauge\nhapsuper_master_cli_up %d\n", e.cliUp)
	return b.String()
}

func one(b bool) int {
	if b {
		return 1
	}
	return 0
}

var names = []string{
	"hapsuper_phase", "hapsuper_drains_total", "hapsuper_drain_duration_seconds", "hapsuper_late_connections_total", "hapsuper_reloads_total", "hapsuper_deadline_seconds",
	"hapsuper_haproxy_sessions", "hapsuper_haproxy_workers", "hapsuper_routing_pending_nodes", "hapsuper_master_cli_up",
}

// The scrape happens at now = t0+10s in every case.
func TestCollectorPhases(t *testing.T) {
	twoWorkers := []status.Worker{{PID: 101, Sessions: 7, Requests: 40}, {PID: 88, Old: true, Sessions: 3, Requests: 900}}
	tests := []struct {
		name string
		snap status.Snapshot
		want expectation
	}{{
		name: "starting: no poll yet, nothing known",
		snap: status.Snapshot{Phase: drain.Starting, MasterPID: 42, Workers: []status.Worker{}},
		want: expectation{phase: drain.Starting, duration: -1},
	}, {
		name: "starting: the master CLI does not answer yet",
		snap: status.Snapshot{Phase: drain.Starting, PollError: "dial unix /var/run/hapsuper/master.sock: connect: no such file or directory"},
		want: expectation{phase: drain.Starting, duration: -1},
	}, {
		name: "serving: one current worker with sessions",
		snap: status.Snapshot{Phase: drain.Serving, ObservedAt: at(9.9), Workers: []status.Worker{{PID: 101, Sessions: 12}}},
		want: expectation{phase: drain.Serving, duration: -1, sessions: 12, current: 1, cliUp: 1},
	}, {
		name: "serving: the pod's own deadline is known before the stop request",
		snap: status.Snapshot{Phase: drain.Serving, ObservedAt: at(9.9), Drain: status.Drain{Phase: drain.Serving, Deadline: at(38)}},
		want: expectation{phase: drain.Serving, duration: -1, deadline: "28", cliUp: 1},
	}, {
		name: "serving: the last poll failed",
		snap: status.Snapshot{Phase: drain.Serving, PollError: "read show proc: i/o timeout", Workers: []status.Worker{}},
		want: expectation{phase: drain.Serving, duration: -1},
	}, {
		name: "draining after a reload: old worker counted, drain not ended",
		snap: status.Snapshot{Phase: drain.Draining, ObservedAt: at(9.95), Workers: twoWorkers,
			Drain:   status.Drain{Phase: drain.Draining, StopRequested: at(4), Bound: at(22), Deadline: at(32)},
			Reloads: status.Reloads{OK: 3, Refused: 2, Failed: 1, Last: &status.Reload{Result: status.ReloadOK}}},
		want: expectation{phase: drain.Draining, duration: -1, deadline: "22", sessions: 10, current: 1, old: 1, cliUp: 1, reloads: [3]int{3, 2, 1}},
	}, {
		name: "draining: kube-proxy not confirmed on 2 nodes",
		snap: status.Snapshot{Phase: drain.Draining, ObservedAt: at(9.95), Workers: []status.Worker{{PID: 101}},
			Drain: status.Drain{Phase: drain.Draining, StopRequested: at(9), Bound: at(27), Deadline: at(37), Conditions: []status.Condition{
				{Name: drain.ConditionQuiet, Met: true}, {Name: drain.ConditionRouting, Detail: "pending", PendingNodes: 2}}}},
		want: expectation{phase: drain.Draining, duration: -1, deadline: "27", current: 1, pending: 2, cliUp: 1},
	}, {
		name: "stopping after a quiet drain of 2.5s",
		snap: status.Snapshot{Phase: drain.Stopping, ObservedAt: at(9.95), Workers: []status.Worker{{PID: 101, Sessions: 2}},
			Drain: status.Drain{Phase: drain.Stopping, StopRequested: at(4), SoftStop: at(6.5), Deadline: at(32), Reason: drain.ReasonQuiet}},
		want: expectation{phase: drain.Stopping, reason: drain.ReasonQuiet, duration: 2.5, deadline: "22", sessions: 2, current: 1, cliUp: 1},
	}, {
		name: "stopping after an unverified drain with 3 late arrivals",
		snap: status.Snapshot{Phase: drain.Stopping, ObservedAt: at(9.95), Workers: []status.Worker{{PID: 101, Sessions: 2}},
			Drain: status.Drain{Phase: drain.Stopping, StopRequested: at(4), SoftStop: at(6.5), Deadline: at(32), Reason: drain.ReasonUnverified, LateConnections: 3}},
		want: expectation{phase: drain.Stopping, reason: drain.ReasonUnverified, duration: 2.5, deadline: "22", sessions: 2, current: 1, cliUp: 1, late: 3},
	}, {
		name: "stopping past the deadline after a bound drain of 18s",
		snap: status.Snapshot{Phase: drain.Stopping, ObservedAt: at(9.95), Workers: []status.Worker{{PID: 101, Sessions: 1}},
			Drain: status.Drain{Phase: drain.Stopping, StopRequested: at(-20), SoftStop: at(-2), Deadline: at(8), HardStop: at(8), Reason: drain.ReasonBound}},
		want: expectation{phase: drain.Stopping, reason: drain.ReasonBound, duration: 18, deadline: "-2", sessions: 1, current: 1, cliUp: 1},
	}, {
		name: "exited after a drain longer than the last bucket",
		snap: status.Snapshot{Phase: drain.Exited, PollError: "dial unix /var/run/hapsuper/master.sock: connect: connection refused", Workers: []status.Worker{},
			Drain: status.Drain{Phase: drain.Exited, StopRequested: at(-100), SoftStop: at(-25), Deadline: at(-10), Exited: at(-24), Reason: drain.ReasonUnavailable}},
		want: expectation{phase: drain.Exited, reason: drain.ReasonUnavailable, duration: 75, deadline: "-20"},
	}, {
		name: "exited without a drain: the master died while serving",
		snap: status.Snapshot{Phase: drain.Exited, PollError: "connection refused", Workers: []status.Worker{},
			Drain: status.Drain{Phase: drain.Exited, Exited: at(9), Detail: "master exited while serving"}},
		want: expectation{phase: drain.Exited, duration: -1},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := collector{board: status.NewBoard(tt.snap), now: func() time.Time { return at(10) }}
			got := scrape(t, c)
			if i := strings.Index(got, "# HELP go_"); i < 0 || got[:i] != tt.want.text() {
				t.Errorf("hapsuper's families:\n%s\nwant:\n%s", got[:max(strings.Index(got, "# HELP go_"), 0)], tt.want.text())
			}
		})
	}
}

// scrape renders c and checks that Prometheus' own text parser reads it.
func scrape(t *testing.T, c collector) string {
	t.Helper()
	var e exposition
	c.write(&e)
	text := e.b.String()
	if _, err := parse(text); err != nil {
		t.Fatalf("Prometheus' parser rejects the exposition: %v\n%s", err, text)
	}
	return text
}

func parse(text string) (map[string]*dto.MetricFamily, error) {
	p := expfmt.NewTextParser(model.LegacyValidation)
	return p.TextToMetricFamilies(strings.NewReader(text))
}

// families scrapes c and returns what Prometheus' parser read.
func families(t *testing.T, c collector) map[string]*dto.MetricFamily {
	t.Helper()
	mfs, err := parse(scrape(t, c))
	if err != nil {
		t.Fatal(err)
	}
	return mfs
}

// Every phase and reason is present as a series from the first scrape, so
// rate() and absent() work without waiting for the first drain.
func TestCollectorSeriesAlwaysPresent(t *testing.T) {
	mfs := families(t, collector{board: status.NewBoard(status.Snapshot{}), now: time.Now})
	for name, want := range map[string]int{
		"hapsuper_phase": len(drain.Phases()), "hapsuper_drains_total": len(drain.Reasons()),
		"hapsuper_drain_duration_seconds": 1, "hapsuper_haproxy_workers": 2,
		"hapsuper_deadline_seconds": 0,
	} {
		if got := len(mfs[name].GetMetric()); got != want {
			t.Errorf("%s: %d series, want %d", name, got, want)
		}
	}
}

// The exposition passes Prometheus' linter (names, units, help) and
// carries the Go runtime's and the process's metrics beside hapsuper's,
// under client_golang's names, with values that are this process's.
func TestExpositionLintAndRuntime(t *testing.T) {
	// /proc counts CPU time in ticks of 10 ms: a test process can be under
	// one tick when it scrapes. Spend at least two first (bounded).
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); {
		var ru syscall.Rusage
		if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil || time.Duration(ru.Utime.Nano()+ru.Stime.Nano()) >= 30*time.Millisecond {
			break
		}
	}
	text := scrape(t, collector{board: status.NewBoard(status.Snapshot{Phase: drain.Serving}), now: time.Now})
	problems, err := promlint.New(strings.NewReader(text)).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint %s: %s", p.Metric, p.Text)
	}
	mfs, _ := parse(text)
	value := func(name string) float64 {
		mf := mfs[name]
		if mf == nil || len(mf.GetMetric()) != 1 {
			t.Errorf("%s: %d families, want one series", name, len(mf.GetMetric()))
			return 0
		}
		m := mf.GetMetric()[0]
		return m.GetGauge().GetValue() + m.GetCounter().GetValue()
	}
	if g := value("go_goroutines"); g < 1 {
		t.Errorf("go_goroutines %g, want at least this test's", g)
	}
	if rss := value("process_resident_memory_bytes"); rss < 1<<20 || rss > 1<<32 {
		t.Errorf("process_resident_memory_bytes %g, want this process's (MBs)", rss)
	}
	if start := value("process_start_time_seconds"); time.Since(time.Unix(int64(start), 0)) > time.Hour || time.Until(time.Unix(int64(start), 0)) > time.Minute {
		t.Errorf("process_start_time_seconds %g (%s), want this test process's start", start, time.Unix(int64(start), 0))
	}
	if fds := value("process_open_fds"); fds < 3 || fds > value("process_max_fds") {
		t.Errorf("process_open_fds %g, max %g", fds, value("process_max_fds"))
	}
	for _, name := range []string{"go_threads", "go_memstats_alloc_bytes", "go_memstats_sys_bytes", "process_cpu_seconds_total", "process_virtual_memory_bytes"} {
		if v := value(name); v <= 0 {
			t.Errorf("%s %g, want > 0", name, v)
		}
	}
}

func TestParseStat(t *testing.T) {
	// A command name with a space and a parenthesis, as proc(5) allows.
	line := "4242 (ha) proxy) S 1 4242 4242 0 -1 4194560 2000 0 0 0 123 45 0 0 20 0 9 0 5678 23456768 2900 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n"
	st, ok := parseStat([]byte(line))
	if want := (stat{utime: 123, stime: 45, start: 5678, vsize: 23456768, rss: 2900}); !ok || st != want {
		t.Errorf("parseStat: %+v %v, want %+v", st, ok, want)
	}
	for _, bad := range []string{"", "4242 (ha S 1", "4242 (ha) S 1 2 3", "4242 (ha) S 1 4242 4242 0 -1 4194560 2000 0 0 0 x 45 0 0 20 0 9 0 5678 23456768 2900"} {
		if st, ok := parseStat([]byte(bad)); ok {
			t.Errorf("parseStat(%q) = %+v, want not ok", bad, st)
		}
	}
}

func TestExpositionEscapes(t *testing.T) {
	var e exposition
	e.family("x_info", "gauge", "a \\ and a\nnewline")
	e.sample("x_info", 1, "v", "q\"b\\n\nl")
	mfs, err := parse(e.b.String())
	if err != nil {
		t.Fatalf("%v\n%s", err, e.b.String())
	}
	if got := mfs["x_info"].GetMetric()[0].GetLabel()[0].GetValue(); got != "q\"b\\n\nl" {
		t.Errorf("label value read back %q", got)
	}
	if got := mfs["x_info"].GetHelp(); got != "a \\ and a\nnewline" {
		t.Errorf("help read back %q", got)
	}
}

// A scrape reads the board as it is at that instant: a publish between two
// scrapes shows in the second without any call into this package.
func TestCollectorReadsAtScrapeTime(t *testing.T) {
	b := status.NewBoard(status.Snapshot{Phase: drain.Serving})
	c := collector{board: b, now: time.Now}
	phase := func() string {
		for _, m := range families(t, c)["hapsuper_phase"].GetMetric() {
			if m.GetGauge().GetValue() == 1 {
				return m.GetLabel()[0].GetValue()
			}
		}
		return ""
	}
	if got := phase(); got != "serving" {
		t.Fatalf("phase %q, want serving", got)
	}
	b.Publish(status.Snapshot{Phase: drain.Draining})
	if got := phase(); got != "draining" {
		t.Fatalf("phase after publish %q, want draining", got)
	}
}
