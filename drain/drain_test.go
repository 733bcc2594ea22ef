package drain

import (
	"testing"
	"time"
)

// Clients that never pause keep the pod draining until the bound: the soft
// stop comes at stop+MaxWait with reason bound, and the detail says how
// recent the last request was.
func TestContinuousTrafficDrainsUntilBound(t *testing.T) {
	r := serving(t, settings)
	r.poll(0, w(100, 0))
	r.stop(sec(1))
	n := uint64(0)
	for off := sec(1.1); off <= sec(20.6); off += poll {
		n++
		r.want(off, r.poll(off, w(100, n)), None)
	}
	r.want(sec(20.9), r.d.Tick(at(sec(20.9))), None)
	r.want(sec(21), r.d.Tick(at(sec(21))), SoftStop)
	r.wantEnd(sec(21), ReasonBound, "quiet: last request 0.4s ago")
}

// HAProxy stops answering with traffic still counted: at the bound the drain
// ends with reason unavailable, naming the error.
func TestFailuresAtBoundAreUnavailable(t *testing.T) {
	r := serving(t, settings)
	r.poll(0, w(100, 0))
	r.stop(0)
	for off, n := sec(0.5), uint64(1); off <= sec(5); off, n = off+poll, n+1 {
		r.want(off, r.poll(off, w(100, n)), None)
	}
	for off := sec(5.5); off < sec(20); off += poll {
		r.want(off, r.fail(off), None)
	}
	r.want(sec(20), r.fail(sec(20)), SoftStop)
	r.wantEnd(sec(20), ReasonUnavailable, "quiet: counters unreadable for 14.5s: "+errPoll.Error())
}

// HAProxy reloading over and over (a controller's reloads every 200 ms):
// the master re-executes and refuses the master CLI for seconds at a time.
// The counters are unknown, so quiet is not proved and the drain runs to
// the bound; but the master did not stop answering, it reloads: the drain
// ends bound, not unavailable, and the detail says why the counters were
// unreadable.
func TestFailuresWhileReloadingAtBoundAreBound(t *testing.T) {
	r := serving(t, settings)
	r.poll(0, w(100, 0))
	r.stop(0)
	for off, n := sec(0.5), uint64(1); off <= sec(5); off, n = off+poll, n+1 {
		r.want(off, r.poll(off, w(100, n)), None)
	}
	reloading := func(off time.Duration) Action {
		r.d.Observe(Observation{At: at(off), Err: errPoll, Reloading: true})
		return r.d.Tick(at(off))
	}
	for off := sec(5.5); off < sec(20); off += poll {
		r.want(off, reloading(off), None)
	}
	r.want(sec(20), reloading(sec(20)), SoftStop)
	r.wantEnd(sec(20), ReasonBound, "quiet: counters unreadable for 14.5s while HAProxy reloads: "+errPoll.Error())
}

// The last poll decides: a spell of failures during a reload that ends in
// failures no reload explains any more (the supervisor's bound on a reload
// passed, or the master was stopped) is HAProxy that stopped answering.
func TestFailuresAfterReloadingAtBoundAreUnavailable(t *testing.T) {
	r := serving(t, settings)
	r.poll(0, w(100, 0))
	r.stop(0)
	for off, n := sec(0.5), uint64(1); off <= sec(5); off, n = off+poll, n+1 {
		r.want(off, r.poll(off, w(100, n)), None)
	}
	for off := sec(5.5); off < sec(15); off += poll {
		r.d.Observe(Observation{At: at(off), Err: errPoll, Reloading: true})
		r.want(off, r.d.Tick(at(off)), None)
	}
	for off := sec(15); off < sec(20); off += poll {
		r.want(off, r.fail(off), None)
	}
	r.want(sec(20), r.fail(sec(20)), SoftStop)
	r.wantEnd(sec(20), ReasonUnavailable, "quiet: counters unreadable for 14.5s: "+errPoll.Error())
}

// No reading at all within the last QuietPeriod (the poll hangs) is
// unavailable too, even when the older readings were quiet.
func TestStaleReadingsAtBoundAreUnavailable(t *testing.T) {
	r := serving(t, settings)
	r.route(0, RoutingPending, "default/web")
	r.poll(0, w(100, 0))
	r.stop(0)
	r.pollIdle(sec(0.5), sec(17.5), poll, w(100, 0))
	r.want(sec(20), r.d.Tick(at(sec(20))), SoftStop)
	r.wantEnd(sec(20), ReasonUnavailable, "routing: pending (default/web); quiet: last reading 2.5s ago")
}

// Routing pending blocks the end however quiet the clients are; once the
// pod is withdrawn everywhere, the next Tick ends it as routed-away.
func TestRoutingPendingBlocksUntilWithdrawn(t *testing.T) {
	r := serving(t, settings)
	r.route(0, RoutingPending, "default/web: endpoint still ready")
	r.poll(0, w(100, 0))
	r.stop(0)
	r.pollIdle(sec(0.5), sec(5), poll, w(100, 0))
	st := r.d.Status(at(sec(5)))
	if rc := st.Conditions[1]; rc.Name != ConditionRouting || rc.Met || rc.Routing.Stated() != "pending (default/web: endpoint still ready)" {
		t.Fatalf("routing condition %+v", rc)
	}
	if !st.Conditions[0].Met {
		t.Fatalf("quiet condition %+v, want met", st.Conditions[0])
	}
	r.route(sec(5.2), RoutingWithdrawn, "")
	r.want(sec(5.5), r.poll(sec(5.5), w(100, 0)), SoftStop)
	r.wantEnd(sec(5.5), ReasonRoutedAway, "")
}

// Routing is not latched: withdrawn and then pending again (kube-proxy falls
// back to terminating endpoints) keeps the drain going, here to the bound.
func TestRoutingFallbackIsNotLatched(t *testing.T) {
	r := serving(t, settings)
	r.poll(0, w(100, 0))
	r.route(0, RoutingPending, "default/web")
	r.stop(0)
	r.route(sec(0.5), RoutingWithdrawn, "")
	r.pollIdle(sec(0.5), sec(1.5), poll, w(100, 0))
	r.route(sec(1.7), RoutingPending, "default/web: no ready endpoint left")
	r.pollIdle(sec(2), sec(19.5), poll, w(100, 0))
	r.want(sec(20), r.poll(sec(20), w(100, 0)), SoftStop)
	r.wantEnd(sec(20), ReasonBound, "routing: pending (default/web: no ready endpoint left)")
}

// Routing that cannot be fully observed lets quiet decide, and the result
// names what was not observed.
func TestRoutingUnverifiedLetsQuietDecide(t *testing.T) {
	r := serving(t, settings)
	r.route(0, RoutingUnverified, "no EndpointSlice lists the pod")
	r.poll(0, w(100, 0))
	r.stop(0)
	r.pollIdle(sec(0.5), sec(1.5), poll, w(100, 0))
	r.want(sec(2), r.poll(sec(2), w(100, 0)), SoftStop)
	r.wantEnd(sec(2), ReasonUnverified, "no EndpointSlice lists the pod")
}

// Routing that cannot be fully observed and clients that never go quiet:
// the drain ends at the bound, and its detail names the unverified routing
// beside the quiet condition, so that it does not read as observed.
func TestRoutingUnverifiedNamedAtBound(t *testing.T) {
	r := serving(t, settings)
	r.route(0, RoutingUnverified, "list nodes: connection refused")
	r.poll(0, w(100, 0))
	r.stop(sec(1))
	n := uint64(0)
	for off := sec(1.1); off <= sec(20.6); off += poll {
		n++
		r.want(off, r.poll(off, w(100, n)), None)
	}
	r.want(sec(21), r.d.Tick(at(sec(21))), SoftStop)
	r.wantEnd(sec(21), ReasonBound, "routing: unverified (list nodes: connection refused); quiet: last request 0.4s ago")
}

// A second stop request is refused and restarts nothing: times stay, and the
// drain ends QuietPeriod after the first request.
func TestSecondStopRequestChangesNothing(t *testing.T) {
	r := serving(t, settings)
	r.poll(0, w(100, 0))
	r.stop(0)
	before := r.d.Status(at(sec(1)))
	if r.d.StopRequested(at(sec(1))) {
		t.Fatal("second StopRequested = true, want false")
	}
	after := r.d.Status(at(sec(1)))
	if !after.StopAt.Equal(before.StopAt) || !after.BoundAt.Equal(before.BoundAt) || !after.Deadline.Equal(before.Deadline) {
		t.Fatalf("times moved: before %+v, after %+v", before, after)
	}
	r.want(sec(1.5), r.poll(sec(1.5), w(100, 0)), None)
	r.want(sec(2), r.poll(sec(2), w(100, 0)), SoftStop)
	if r.d.StopRequested(at(sec(3))) {
		t.Fatal("StopRequested while stopping = true, want false")
	}
}

// The pod's own grace period, learnt mid-drain, moves the deadline earlier
// and shortens the bound in proportion: 20s of the 28s budget become 20/28 of
// the 18s left, 12.86s; the hard stop comes at the new deadline.
func TestEarlierDeadlineMovesBound(t *testing.T) {
	r := serving(t, settings)
	r.poll(0, w(100, 0))
	r.stop(0)
	n := uint64(0)
	traffic := func(off time.Duration) Action { n++; return r.poll(off, w(100, n)) }
	r.want(sec(3), traffic(sec(3)), None)
	if !r.d.SetPodGracePeriod(sec(20)) {
		t.Fatal("SetPodGracePeriod(20s) = false, want true: shorter than the 30s grace period")
	}
	if r.d.SetPodGracePeriod(sec(27)) { // longer: ignored
		t.Fatal("SetPodGracePeriod(27s) after 20s = true, want false")
	}
	st := r.d.Status(at(sec(3)))
	bound := sec(20) * 18 / 28
	if !st.Deadline.Equal(at(sec(18))) || !st.BoundAt.Equal(at(bound)) {
		t.Fatalf("deadline %v bound %v, want 18s and %v", st.Deadline.Sub(t0), st.BoundAt.Sub(t0), bound)
	}
	for off := sec(3.5); off < bound; off += poll {
		r.want(off, traffic(off), None)
	}
	r.want(bound, traffic(bound), SoftStop)
	r.wantEnd(bound, ReasonBound, "quiet: last request 0.0s ago")
	r.want(sec(17.9), r.d.Tick(at(sec(17.9))), None)
	r.want(sec(18), r.d.Tick(at(sec(18))), HardStop)
}

// The hard stop comes at the deadline exactly, once; the soft stop once.
func TestEachActionExactlyOnce(t *testing.T) {
	r := serving(t, settings)
	r.poll(0, w(100, 0))
	r.stop(0)
	r.pollIdle(sec(0.5), sec(1.5), poll, w(100, 0))
	r.want(sec(2), r.poll(sec(2), w(100, 0)), SoftStop)
	n := uint64(0)
	for off := sec(2); off < sec(28); off += poll {
		n++ // clients keep going after the soft stop: nothing more to do
		r.want(off, r.poll(off, w(100, n)), None)
	}
	r.want(sec(27.999), r.d.Tick(at(sec(27.999))), None)
	r.want(sec(28), r.d.Tick(at(sec(28))), HardStop)
	for off := sec(28); off <= sec(40); off += poll {
		r.want(off, r.d.Tick(at(off)), None)
	}
	if st := r.d.Status(at(sec(40))); !st.HardStopAt.Equal(at(sec(28))) || st.Reason != ReasonQuiet {
		t.Fatalf("status %+v", st)
	}
}

// A deadline already past at the stop request (the pod's grace period, 1s,
// is shorter than the margin): the soft stop comes at the first Tick and the
// hard stop at the next one.
func TestPastDeadlineSoftThenHard(t *testing.T) {
	r := serving(t, settings)
	r.d.SetPodGracePeriod(sec(1))
	r.poll(0, w(100, 0))
	r.stop(0)
	r.want(0, r.d.Tick(t0), SoftStop)
	r.want(0, r.d.Tick(t0), HardStop)
	r.want(0, r.d.Tick(t0), None)
}

// The master dying while serving ends everything: no drain, no actions.
func TestMasterExitedWhileServing(t *testing.T) {
	r := serving(t, settings)
	r.d.MasterExited(at(sec(5)))
	st := r.d.Status(at(sec(5)))
	if st.Phase != Exited || !st.ExitedAt.Equal(at(sec(5))) || st.Detail != "master exited while serving" {
		t.Fatalf("status %+v", st)
	}
	if r.d.StopRequested(at(sec(6))) {
		t.Fatal("StopRequested after exit = true, want false")
	}
	r.want(sec(100), r.d.Tick(at(sec(100))), None)
}

// The master dying mid-drain or after the soft stop: no action is due any
// more, not even the hard stop at the deadline; the drain's reason stays.
func TestMasterExitedDuringDrain(t *testing.T) {
	r := serving(t, settings)
	r.poll(0, w(100, 0))
	r.stop(0)
	r.d.MasterExited(at(sec(1)))
	r.want(sec(20), r.d.Tick(at(sec(20))), None)

	r = serving(t, settings)
	r.poll(0, w(100, 0))
	r.stop(0)
	r.want(sec(2), r.poll(sec(2), w(100, 0)), SoftStop)
	r.d.MasterExited(at(sec(3)))
	r.want(sec(28), r.d.Tick(at(sec(28))), None)
	if st := r.d.Status(at(sec(28))); st.Phase != Exited || st.Reason != ReasonQuiet {
		t.Fatalf("status %+v", st)
	}
}

// A stop before HAProxy is ready drains by the same rules; the first reading
// ever counts as a change, since nothing was seen before it.
func TestStopWhileStarting(t *testing.T) {
	r := &run{t: t, d: New(settings)}
	r.stop(0)
	r.d.Ready(at(sec(0.2))) // too late: the drain goes on
	r.want(sec(0.5), r.fail(sec(0.5)), None)
	r.want(sec(1), r.poll(sec(1), w(100, 0)), None)
	r.pollIdle(sec(1.5), sec(2.5), poll, w(100, 0))
	r.want(sec(3), r.poll(sec(3), w(100, 0)), SoftStop)
	r.wantEnd(sec(3), ReasonQuiet, "")
}

// Ticks before a stop request do nothing, whatever the counters say.
func TestNoActionWithoutStop(t *testing.T) {
	r := &run{t: t, d: New(settings)}
	r.want(0, r.d.Tick(t0), None)
	r.d.Ready(at(sec(1)))
	for off := sec(1); off <= sec(60); off += sec(5) {
		r.want(off, r.poll(off, w(100, 0)), None)
	}
	if st := r.d.Status(at(sec(60))); st.Phase != Serving || len(st.Conditions) != 0 {
		t.Fatalf("status %+v", st)
	}
}

// An external path judged by the load balancer's health check ends the
// drain lb-marked-down, once new connections have been quiet for the
// withdrawn period; the detail ends with the last new connection, the
// evidence that the balancer stopped sending.
func TestRoutingBalancerEndsLBMarkedDown(t *testing.T) {
	s := settings
	s.WithdrawnQuietPeriod = time.Second
	r := serving(t, s)
	r.route(0, RoutingPending, "external path: window not passed")
	r.poll(0, w(100, 0))
	r.stop(0)
	n := uint64(0)
	for off := sec(0.5); off <= sec(3); off += poll {
		n++
		r.want(off, r.poll(off, w(100, n)), None)
	}
	r.d.SetRouting(Routing{State: RoutingWithdrawn, Balancer: true, Why: note("balancer window passed")}, at(sec(3.2)))
	r.want(sec(3.5), r.poll(sec(3.5), w(100, n)), None)
	r.want(sec(4), r.poll(sec(4), w(100, n)), SoftStop)
	r.wantEnd(sec(4), ReasonLBMarkedDown, "balancer window passed; last new connection 1.0s ago, last reading 0.0s ago")
}
