package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/hapsuper/hapsuper/drain"
	"github.com/hapsuper/hapsuper/status"
)

const namespace = "hapsuper"

// DrainBuckets are the upper bounds, in seconds, of drain_duration_seconds:
// from a drain that ends at its first quiet period (0.5 s and up) to one that
// runs a long bound (60 s).
var DrainBuckets = []float64{0.5, 1, 2, 3, 5, 7.5, 10, 15, 20, 30, 45, 60}

var (
	phaseDesc = prometheus.NewDesc(namespace+"_phase",
		"1 for the phase hapsuper is in, 0 for the others (starting, serving, draining, stopping, exited).",
		[]string{"phase"}, nil)
	drainsDesc = prometheus.NewDesc(namespace+"_drains_total",
		"Drains ended, by reason; a process drains at most once.",
		[]string{"reason"}, nil)
	drainDurationDesc = prometheus.NewDesc(namespace+"_drain_duration_seconds",
		"Time from the stop request to the soft stop, observed once when the drain ended.",
		nil, nil)
	deadlineDesc = prometheus.NewDesc(namespace+"_deadline_seconds",
		"Seconds left before the hard-stop deadline, negative past it; absent while no deadline is known.",
		nil, nil)
	sessionsDesc = prometheus.NewDesc(namespace+"_haproxy_sessions",
		"Current sessions summed over every HAProxy worker, old workers included, as last polled.",
		nil, nil)
	workersDesc = prometheus.NewDesc(namespace+"_haproxy_workers",
		"HAProxy workers as last polled, by kind: current, or old (left by a reload).",
		[]string{"kind"}, nil)
	pendingNodesDesc = prometheus.NewDesc(namespace+"_routing_pending_nodes",
		"Nodes whose kube-proxy has not yet confirmed the pod's withdrawal (kube-proxy mode, during a drain); 0 otherwise.",
		nil, nil)
	cliUpDesc = prometheus.NewDesc(namespace+"_master_cli_up",
		"1 when the last poll of HAProxy's master CLI succeeded, 0 when it failed or none was made yet.",
		nil, nil)
)

// board is what the collector reads: the supervisor's status.Board.
type board interface{ Load() status.Snapshot }

// collector turns the latest snapshot into metrics at each scrape.
type collector struct {
	board board
	now   func() time.Time
}

var _ prometheus.Collector = collector{}

// NewRegistry returns a registry with hapsuper's metrics read from b at each
// scrape, with now as the clock for deadline_seconds, and the Go runtime and
// process collectors.
func NewRegistry(b *status.Board, now func() time.Time) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collector{board: b, now: now},
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return reg
}

// Describe implements prometheus.Collector.
func (collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{phaseDesc, drainsDesc, drainDurationDesc, deadlineDesc, sessionsDesc, workersDesc, pendingNodesDesc, cliUpDesc} {
		ch <- d
	}
}

// Collect implements prometheus.Collector. Label values and counts are
// fixed by this file, so the MustNew constructors cannot panic.
func (c collector) Collect(ch chan<- prometheus.Metric) {
	s := c.board.Load()
	for _, p := range drain.Phases() {
		ch <- prometheus.MustNewConstMetric(phaseDesc, prometheus.GaugeValue, boolValue(s.Phase == p), string(p))
	}
	for _, r := range drain.Reasons() {
		ch <- prometheus.MustNewConstMetric(drainsDesc, prometheus.CounterValue, boolValue(s.Drain.Reason == r), string(r))
	}
	ch <- drainDuration(s.Drain)
	if !s.Drain.Deadline.IsZero() {
		ch <- prometheus.MustNewConstMetric(deadlineDesc, prometheus.GaugeValue, s.Drain.Deadline.Sub(c.now()).Seconds())
	}
	var sessions int64
	var current, old int
	for _, w := range s.Workers {
		sessions += w.Sessions
		if w.Old {
			old++
		} else {
			current++
		}
	}
	ch <- prometheus.MustNewConstMetric(sessionsDesc, prometheus.GaugeValue, float64(sessions))
	ch <- prometheus.MustNewConstMetric(workersDesc, prometheus.GaugeValue, float64(current), "current")
	ch <- prometheus.MustNewConstMetric(workersDesc, prometheus.GaugeValue, float64(old), "old")
	pending := 0
	for _, c := range s.Drain.Conditions {
		if c.Name == drain.ConditionRouting {
			pending = c.PendingNodes
		}
	}
	ch <- prometheus.MustNewConstMetric(pendingNodesDesc, prometheus.GaugeValue, float64(pending))
	ch <- prometheus.MustNewConstMetric(cliUpDesc, prometheus.GaugeValue, boolValue(s.PollError == "" && !s.ObservedAt.IsZero()))
}

// drainDuration is the histogram of this process's one drain: empty until
// the drain ended (its reason set and the soft stop sent), then one
// observation of stop request → soft stop.
func drainDuration(st status.Drain) prometheus.Metric {
	buckets := make(map[float64]uint64, len(DrainBuckets))
	for _, b := range DrainBuckets {
		buckets[b] = 0
	}
	if st.Reason == drain.ReasonNone || st.StopRequested.IsZero() || st.SoftStop.IsZero() {
		return prometheus.MustNewConstHistogram(drainDurationDesc, 0, 0, buckets)
	}
	d := st.SoftStop.Sub(st.StopRequested).Seconds()
	for _, b := range DrainBuckets {
		if d <= b {
			buckets[b] = 1
		}
	}
	return prometheus.MustNewConstHistogram(drainDurationDesc, 1, d, buckets)
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
