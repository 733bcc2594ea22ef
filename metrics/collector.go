package metrics

import (
	"time"

	"github.com/hapsuper/hapsuper/drain"
	"github.com/hapsuper/hapsuper/status"
)

const namespace = "hapsuper"

// DrainBuckets are the upper bounds, in seconds, of drain_duration_seconds:
// from a drain that ends at its first quiet period (0.5 s and up) to one that
// runs a long bound (60 s).
var DrainBuckets = []float64{0.5, 1, 2, 3, 5, 7.5, 10, 15, 20, 30, 45, 60}

// board is what the collector reads: the supervisor's status.Board.
type board interface{ Load() status.Snapshot }

// collector turns the latest snapshot into metrics at each scrape.
type collector struct {
	board board
	now   func() time.Time
}

// write renders hapsuper's families from the snapshot as it is now, then
// the Go runtime's and the process's.
func (c collector) write(e *exposition) {
	s := c.board.Load()
	e.family(namespace+"_phase", "gauge", "1 for the phase hapsuper is in, 0 for the others (starting, serving, draining, stopping, exited).")
	for _, p := range drain.Phases() {
		e.sample(namespace+"_phase", boolValue(s.Phase == p), "phase", string(p))
	}
	e.family(namespace+"_drains_total", "counter", "Drains ended, by reason; a process drains at most once.")
	for _, r := range drain.Reasons() {
		e.sample(namespace+"_drains_total", boolValue(s.Drain.Reason == r), "reason", string(r))
	}
	writeDrainDuration(e, s.Drain)
	e.one(namespace+"_late_connections_total", "counter", "New connections counted after the in-flight window of a withdrawn routing verdict: a path hapsuper does not observe sent them; above 0 the drain ends unverified.",
		float64(s.Drain.LateConnections))
	e.family(namespace+"_reloads_total", "counter", "Reloads of HAProxy by result: ok (a new worker serves), refused (haproxy -c failed, nothing sent), failed (HAProxy did not load it; the old worker serves).")
	for _, r := range status.ReloadResults() {
		e.sample(namespace+"_reloads_total", float64(s.Reloads.Count(r)), "result", string(r))
	}
	if !s.Drain.Deadline.IsZero() {
		e.one(namespace+"_deadline_seconds", "gauge", "Seconds left before the hard-stop deadline, negative past it; absent while no deadline is known.",
			s.Drain.Deadline.Sub(c.now()).Seconds())
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
	e.one(namespace+"_haproxy_sessions", "gauge", "Current sessions summed over every HAProxy worker, old workers included, as last polled.", float64(sessions))
	e.family(namespace+"_haproxy_workers", "gauge", "HAProxy workers as last polled, by kind: current, or old (left by a reload).")
	e.sample(namespace+"_haproxy_workers", float64(current), "kind", "current")
	e.sample(namespace+"_haproxy_workers", float64(old), "kind", "old")
	pending := 0
	for _, c := range s.Drain.Conditions {
		if c.Name == drain.ConditionRouting {
			pending = c.PendingNodes
		}
	}
	e.one(namespace+"_routing_pending_nodes", "gauge", "Nodes whose kube-proxy has not yet confirmed the pod's withdrawal (kube-proxy mode, during a drain); 0 otherwise.", float64(pending))
	e.one(namespace+"_master_cli_up", "gauge", "1 when the last poll of HAProxy's master CLI succeeded, 0 when it failed or none was made yet.",
		boolValue(s.PollError == "" && !s.ObservedAt.IsZero()))
	if s.Companion != nil {
		writeCompanion(e, *s.Companion)
	}
	writeRuntime(e)
	writeProcess(e)
}

// writeCompanion writes the companion's families (--companion; absent
// without one): its state, its restarts and its last exit code.
func writeCompanion(e *exposition, c status.Companion) {
	e.family(namespace+"_companion_state", "gauge", "1 for the state the companion process (--companion) is in, 0 for the others.")
	for _, st := range status.CompanionStates() {
		e.sample(namespace+"_companion_state", boolValue(c.State == st), "state", st)
	}
	e.one(namespace+"_companion_restarts_total", "counter", "Starts of the companion process after its first: it exited 0 or by a signal.", float64(c.Restarts))
	if c.LastExit != nil {
		e.one(namespace+"_companion_last_exit_code", "gauge", "The companion's last exit code as a shell reports it (128+n: killed by signal n); absent until it first exited.", float64(*c.LastExit))
	}
}

// writeDrainDuration writes the histogram of this process's one drain:
// empty until the drain ended (its reason set and the soft stop sent), then
// one observation of stop request → soft stop.
func writeDrainDuration(e *exposition, st status.Drain) {
	const name = namespace + "_drain_duration_seconds"
	e.family(name, "histogram", "Time from the stop request to the soft stop, observed once when the drain ended.")
	ended := st.Reason != drain.ReasonNone && !st.StopRequested.IsZero() && !st.SoftStop.IsZero()
	d := 0.0
	if ended {
		d = st.SoftStop.Sub(st.StopRequested).Seconds()
	}
	for _, b := range DrainBuckets {
		e.sample(name+"_bucket", boolValue(ended && d <= b), "le", formatValue(b))
	}
	e.sample(name+"_bucket", boolValue(ended), "le", "+Inf")
	e.sample(name+"_sum", d)
	e.sample(name+"_count", boolValue(ended))
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
