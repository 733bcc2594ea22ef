package drain

import (
	"strings"
	"testing"
	"time"
)

// Kept-alive traffic: every poll the counted requests rise, while no new
// connection is opened after the stop request. The steps below feed that
// traffic from..to at the poll interval, and the routing states change
// where the scenarios say.
func (r *run) keptAlive(from, to time.Duration, pid int, reqs *uint64, conns uint64, want Action) {
	r.t.Helper()
	for off := from; off <= to; off += poll {
		*reqs += 3
		r.want(off, r.poll(off, ka(pid, *reqs, conns)), want)
	}
}

// Once routing is withdrawn, requests on connections opened before say
// nothing about routing: quiet counts new connections only, and the drain
// ends routed-away at the first reading QuietPeriod after the last new
// connection (here the stop request), although requests never paused.
func TestWithdrawnCountsNewConnectionsOnly(t *testing.T) {
	r := serving(t, settings)
	reqs := uint64(100)
	r.poll(0, ka(100, reqs, 10))
	r.stop(0)
	r.keptAlive(sec(0.5), sec(1), 100, &reqs, 10, None)
	r.route(sec(1.2), RoutingWithdrawn, "")
	r.keptAlive(sec(1.5), sec(1.5), 100, &reqs, 10, None)
	reqs += 3
	r.want(sec(2), r.poll(sec(2), ka(100, reqs, 10)), SoftStop)
	r.wantEnd(sec(2), ReasonRoutedAway, "")
}

// The same traffic while routing is pending, unverified or off keeps the
// requests' rule: the drain runs to the bound, which names the requests.
func TestKeptAliveRequestsCountUnlessWithdrawn(t *testing.T) {
	for _, state := range []RoutingState{RoutingPending, RoutingUnverified, RoutingOff} {
		t.Run(string(state), func(t *testing.T) {
			r := serving(t, settings)
			reqs := uint64(100)
			r.poll(0, ka(100, reqs, 10))
			r.stop(0)
			r.route(0, state, "")
			r.keptAlive(sec(0.5), sec(19.5), 100, &reqs, 10, None)
			reqs += 3
			r.want(sec(20), r.poll(sec(20), ka(100, reqs, 10)), SoftStop)
			if st := r.d.Status(at(sec(20))); st.Reason != ReasonBound || !strings.Contains(st.Detail, "quiet: last request 0.0s ago") {
				t.Fatalf("end %s %q, want bound naming the last request", st.Reason, st.Detail)
			}
		})
	}
}

// A new connection after the withdrawal (a path not observed, or a client
// whose SYN was in flight) moves the connections' clock: the drain waits a
// full withdrawn quiet period after it.
func TestWithdrawnNewConnectionRestartsQuiet(t *testing.T) {
	r := serving(t, settings)
	reqs := uint64(100)
	r.poll(0, ka(100, reqs, 10))
	r.stop(0)
	r.route(0, RoutingWithdrawn, "")
	r.keptAlive(sec(0.5), sec(1), 100, &reqs, 10, None)
	r.keptAlive(sec(1.5), sec(3), 100, &reqs, 11, None) // one new connection at 1.5s
	if q := r.d.Status(at(sec(3))).Conditions[0]; q.Met || q.Detail != "last new connection 1.5s ago" || !q.Since.Equal(at(sec(1.5))) {
		t.Fatalf("quiet at 3s = %+v, want pending on the connection of 1.5s", q)
	}
	reqs += 3
	r.want(sec(3.5), r.poll(sec(3.5), ka(100, reqs, 11)), SoftStop)
	r.wantEnd(sec(3.5), ReasonRoutedAway, "")
}

// Routing that flaps from withdrawn back to pending (kube-proxy falls back
// to this terminating pod) while a kept-alive client is active blocks at
// once, on the requests' clock; withdrawn again, the connections' clock
// decides afresh.
func TestWithdrawnFlapsBackToPending(t *testing.T) {
	r := serving(t, settings)
	reqs := uint64(100)
	r.poll(0, ka(100, reqs, 10))
	r.stop(0)
	r.route(sec(0.2), RoutingWithdrawn, "")
	r.keptAlive(sec(0.5), sec(1.5), 100, &reqs, 10, None)
	r.route(sec(1.7), RoutingPending, "default/web: endpoint ready again")
	r.keptAlive(sec(2), sec(4), 100, &reqs, 10, None) // connections quiet 4s: pending blocks
	r.d.SetRouting(Routing{State: RoutingUnverified, Why: note("node b not observed")}, at(sec(4.2)))
	r.keptAlive(sec(4.5), sec(6), 100, &reqs, 10, None) // unverified: requests count again
	r.route(sec(6.2), RoutingWithdrawn, "")
	reqs += 3
	r.want(sec(6.5), r.poll(sec(6.5), ka(100, reqs, 10)), SoftStop)
	r.wantEnd(sec(6.5), ReasonRoutedAway, "")
}

// A reload during the drain: the new worker's first connections are a
// change of the connections' clock too (a new worker starts at zero; its
// traffic came on new connections).
func TestWithdrawnNewWorkerAfterReload(t *testing.T) {
	r := serving(t, settings)
	r.poll(0, ka(100, 500, 10))
	r.stop(0)
	r.route(0, RoutingWithdrawn, "")
	old := Worker{PID: 100, Old: true, Requests: 503, Connections: 10}
	r.want(sec(1), r.poll(sec(1), old, ka(200, 0, 0)), None)
	r.want(sec(1.5), r.poll(sec(1.5), old, ka(200, 4, 2)), None)
	old.Requests = 520 // the old worker's kept-alive clients go on
	r.pollIdle(sec(2), sec(3), poll, old, ka(200, 4, 2))
	r.want(sec(3.5), r.poll(sec(3.5), old, ka(200, 4, 2)), SoftStop)
	r.wantEnd(sec(3.5), ReasonRoutedAway, "")
}

// A frontend whose soft stop is not graceful keeps its requests in
// Connections (the poller sums them there): kept-alive requests on it hold
// the drain, and the detail names the frontend and the option it lacks.
func TestWithdrawnUngracefulFrontendNamed(t *testing.T) {
	s := settings
	s.UngracefulFrontends = []string{"legacy"}
	r := serving(t, s)
	reqs := uint64(100)
	r.poll(0, w(100, reqs))
	r.stop(0)
	r.route(0, RoutingWithdrawn, "")
	for off := sec(0.5); off < sec(20); off += poll {
		reqs += 3
		r.want(off, r.poll(off, w(100, reqs)), None)
	}
	q := r.d.Status(at(sec(19.5))).Conditions[0]
	if q.Met || !strings.Contains(q.Detail, "request on legacy (no option idle-close-on-response") {
		t.Fatalf("quiet = %+v, want the detail to name frontend legacy", q)
	}
	reqs += 3
	r.want(sec(20), r.poll(sec(20), w(100, reqs)), SoftStop)
	if st := r.d.Status(at(sec(20))); st.Reason != ReasonBound || !strings.Contains(st.Detail, "legacy") {
		t.Fatalf("end %s %q, want bound naming legacy", st.Reason, st.Detail)
	}
}

// WithdrawnQuietPeriod shortens quiet once routing is withdrawn, and only
// then: unverified routing keeps QuietPeriod.
func TestWithdrawnQuietPeriod(t *testing.T) {
	s := settings
	s.WithdrawnQuietPeriod = 500 * time.Millisecond
	for _, tc := range []struct {
		state RoutingState
		end   time.Duration
	}{{RoutingWithdrawn, sec(1.5)}, {RoutingUnverified, sec(3)}} {
		t.Run(string(tc.state), func(t *testing.T) {
			r := serving(t, s)
			r.poll(0, w(100, 10))
			r.stop(0)
			r.want(sec(0.5), r.poll(sec(0.5), w(100, 12)), None)
			r.want(sec(1), r.poll(sec(1), w(100, 13)), None)
			r.route(sec(1.2), tc.state, "")
			for off := sec(1.5); off < tc.end; off += poll {
				r.want(off, r.poll(off, w(100, 13)), None)
			}
			r.want(tc.end, r.poll(tc.end, w(100, 13)), SoftStop)
		})
	}
}

// A worker that leaves while the counters cannot be read, and whose stop
// line never comes, blinds both clocks: after it, withdrawn quiet too needs
// a full period of successful readings.
func TestWithdrawnBlindAfterFailure(t *testing.T) {
	r := serving(t, settings)
	r.poll(0, ka(100, 10, 5))
	r.stop(0)
	r.route(0, RoutingWithdrawn, "")
	r.want(sec(1), r.fail(sec(1)), None)
	r.pollIdle(sec(1.5), sec(3), poll, ka(200, 0, 0))
	r.want(sec(3.5), r.poll(sec(3.5), ka(200, 0, 0)), SoftStop)
	r.wantEnd(sec(3.5), ReasonRoutedAway, "")
}
