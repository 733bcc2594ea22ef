package drain

import (
	"testing"
	"time"
)

// The bound and deadline derived from the settings, the stop request (at 0)
// and the pod's grace periods fed before or after it.
func TestSchedule(t *testing.T) {
	tests := []struct {
		name       string
		s          Settings
		before     []time.Duration // SetPodGracePeriod before the stop request
		after      []time.Duration // SetPodGracePeriod after it
		bound, ddl time.Duration
	}{
		{name: "settings only", s: settings, bound: sec(20), ddl: sec(28)},
		// A shorter grace period shortens both shares in proportion:
		// the drain keeps 20/28 of the budget it has, 18s.
		{name: "earlier deadline shortens bound", s: settings, after: []time.Duration{sec(20)}, bound: sec(20) * 18 / 28, ddl: sec(18)},
		{name: "later deadline ignored", s: settings, after: []time.Duration{sec(20), sec(27)}, bound: sec(20) * 18 / 28, ddl: sec(18)},
		{name: "grace learnt before stop", s: settings, before: []time.Duration{sec(26), sec(28)}, bound: sec(20) * 24 / 28, ddl: sec(24)},
		{name: "longer pod grace ignored", s: settings, before: []time.Duration{sec(42)}, bound: sec(20), ddl: sec(28)},
		// A budget shorter than the soft stop's full share (8s) still
		// leaves the drain its part of it, not nothing.
		{name: "short grace keeps the drain's share", s: settings, after: []time.Duration{sec(7)}, bound: sec(20) * 5 / 28, ddl: sec(5)},
		{name: "zero pod grace: deadline past", s: settings, after: []time.Duration{0}, bound: 0, ddl: -sec(2)},
		{name: "bound never after deadline", s: Settings{QuietPeriod: sec(2), MaxWait: sec(40), GracePeriod: sec(30), Margin: sec(2)}, bound: sec(28), ddl: sec(28)},
		// kubectl delete --grace-period on a pod whose hapsuper has 12s:
		// two thirds of grace - margin for the drain, the rest for the
		// soft stop.
		{name: "deleted with 5s of 12s", s: pod12, after: []time.Duration{sec(5)}, bound: pod12.MaxWait * 3 / 10, ddl: sec(3)},
		{name: "deleted with 3s of 12s", s: pod12, after: []time.Duration{sec(3)}, bound: pod12.MaxWait * 1 / 10, ddl: sec(1)},
		{name: "5s learnt before the stop", s: pod12, before: []time.Duration{sec(5)}, bound: pod12.MaxWait * 3 / 10, ddl: sec(3)},
		// No budget: soft stop at once, hard stop at the next Tick.
		{name: "grace equal to margin", s: pod12, after: []time.Duration{sec(2)}, bound: 0, ddl: 0},
		{name: "grace below margin", s: pod12, after: []time.Duration{sec(1)}, bound: 0, ddl: -sec(1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := New(tt.s)
			for _, x := range tt.before {
				d.SetPodGracePeriod(x)
			}
			d.StopRequested(t0)
			for _, x := range tt.after {
				d.SetPodGracePeriod(x)
			}
			st := d.Status(t0)
			if got := st.BoundAt.Sub(t0); got != tt.bound {
				t.Errorf("bound %v, want %v", got, tt.bound)
			}
			if got := st.Deadline.Sub(t0); got != tt.ddl {
				t.Errorf("deadline %v, want %v", got, tt.ddl)
			}
		})
	}
}

// pod12 are the timings of a hapsuper run with --grace-period 12s and the
// defaults of routing kube-proxy: margin 2s, max wait two thirds of 10s,
// withdrawn quiet period 500ms.
var pod12 = Settings{QuietPeriod: sec(2), WithdrawnQuietPeriod: sec(0.5), MaxWait: sec(6.666), GracePeriod: sec(12), Margin: sec(2)}

// A pod deleted with a 5s grace period (kubectl delete --grace-period=5)
// while hapsuper has 12s: the deletion is seen just after the stop request.
// The drain keeps two thirds of the 3s budget, so a withdrawal that takes
// 1.5s (clients stop opening connections here at 1.3s, when kube-proxy
// synced) still ends it routed-away; the hard stop stays at 3s.
func TestShortPodGraceEndsRoutedAway(t *testing.T) {
	r := serving(t, pod12)
	r.route(0, RoutingPending, "default/web: endpoint still ready")
	r.poll(0, w(100, 0))
	r.stop(0)
	if !r.d.SetPodGracePeriod(sec(5)) {
		t.Fatal("SetPodGracePeriod(5s) = false, want true: shorter than the 12s grace period")
	}
	step := sec(0.1)
	n := uint64(0)
	for off := step; off <= sec(1.3); off += step {
		n++ // a new connection every poll until kube-proxy's rules change
		r.want(off, r.poll(off, w(100, n)), None)
	}
	r.route(sec(1.5), RoutingWithdrawn, "")
	r.pollIdle(sec(1.4), sec(1.7), step, w(100, n))
	r.want(sec(1.8), r.poll(sec(1.8), w(100, n)), SoftStop)
	r.wantEnd(sec(1.8), ReasonRoutedAway, "")
	r.want(sec(2.9), r.d.Tick(at(sec(2.9))), None)
	r.want(sec(3), r.d.Tick(at(sec(3))), HardStop)
}

// A pod deleted with a 3s grace period while hapsuper has 12s: 1s of
// budget, two thirds of it for the drain. Routing cannot be withdrawn that
// fast: the drain ends at the bound, not before, and the hard stop comes at
// 1s, a second before the kubelet's SIGKILL.
func TestShortPodGraceKeepsTwoThirds(t *testing.T) {
	r := serving(t, pod12)
	r.route(0, RoutingPending, "default/web: endpoint still ready")
	r.poll(0, w(100, 0))
	r.stop(0)
	r.d.SetPodGracePeriod(sec(3))
	bound := pod12.MaxWait / 10
	n := uint64(0)
	for off := time.Duration(0); off < bound; off += sec(0.1) {
		n++
		r.want(off, r.poll(off, w(100, n)), None)
	}
	r.want(bound, r.poll(bound, w(100, n)), SoftStop)
	r.wantEnd(bound, ReasonBound, "routing: pending (default/web: endpoint still ready); quiet: last request 0.1s ago")
	r.want(sec(0.9), r.d.Tick(at(sec(0.9))), None)
	r.want(sec(1), r.d.Tick(at(sec(1))), HardStop)
}

// A grace period no longer than the margin leaves no budget: the deadline
// is at or before the stop request, so the soft stop comes at the first
// Tick and the hard stop at the next, while the kubelet's SIGKILL is still
// the whole grace period away (at least 2s: the kubelet's minimum).
func TestNoBudgetSoftThenHardAtOnce(t *testing.T) {
	for _, g := range []time.Duration{sec(2), sec(1), 0} {
		r := serving(t, pod12)
		r.poll(0, w(100, 0))
		r.stop(0)
		r.d.SetPodGracePeriod(g)
		r.want(sec(0.01), r.poll(sec(0.01), w(100, 1)), SoftStop)
		r.wantEnd(sec(0.01), ReasonBound, "quiet: last request 0.0s ago")
		r.want(sec(0.02), r.d.Tick(at(sec(0.02))), HardStop)
	}
}
