package drain

import (
	"testing"
	"time"
)

// nc is a worker whose every request came on a new connection, all three
// counters together.
func nc(pid int, n uint64) Worker {
	return Worker{PID: pid, Requests: n, Connections: n, Accepted: map[string]uint64{"web": n}}
}

// auditSettings: quiet 2 s, withdrawn quiet 1 s, in-flight window 300 ms.
var auditSettings = func() Settings {
	s := settings
	s.WithdrawnQuietPeriod = time.Second
	s.InFlightWindow = 300 * time.Millisecond
	return s
}()

// New connections within the in-flight window of the withdrawn verdict are
// expected: the drain stays routed-away.
func TestAuditInFlightKeepsTheVerdict(t *testing.T) {
	r := serving(t, auditSettings)
	r.route(0, RoutingPending, "endpoint ready")
	r.poll(0, nc(100, 10))
	r.stop(0)
	r.want(sec(0.5), r.poll(sec(0.5), nc(100, 20)), None)
	r.route(sec(1), RoutingWithdrawn, "confirmed")
	r.want(sec(1.2), r.poll(sec(1.2), nc(100, 21)), None) // 200 ms after: in flight
	r.pollIdle(sec(1.5), sec(2.1), poll, nc(100, 21))
	r.want(sec(2.2), r.poll(sec(2.2), nc(100, 21)), SoftStop)
	r.wantEnd(sec(2.2), ReasonRoutedAway, "confirmed")
	if st := r.d.Status(at(sec(2.2))); st.LateConnections != 0 {
		t.Errorf("LateConnections %d, want 0", st.LateConnections)
	}
}

// A new connection counted after the in-flight window came through a path
// the verdict did not see: the quiet clock restarts, and the drain ends
// unverified, naming the late arrivals.
func TestAuditLateArrivalTurnsUnverified(t *testing.T) {
	for _, tc := range []struct {
		name    string
		routing Routing
	}{
		{"routed-away", Routing{State: RoutingWithdrawn, Why: note("confirmed")}},
		{"lb-marked-down", Routing{State: RoutingWithdrawn, Balancer: true, Why: note("confirmed")}},
		{"withdrawn-in-api", Routing{State: RoutingWithdrawn, APIOnly: true, Why: note("confirmed")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := serving(t, auditSettings)
			r.poll(0, nc(100, 10))
			r.stop(0)
			r.want(sec(0.5), r.poll(sec(0.5), nc(100, 15)), None)
			r.want(sec(1), r.poll(sec(1), nc(100, 18)), None)
			r.d.SetRouting(tc.routing, at(sec(1)))
			r.want(sec(1.5), r.poll(sec(1.5), nc(100, 18)), None)
			r.want(sec(1.8), r.poll(sec(1.8), nc(100, 21)), None) // 800 ms after the verdict: late
			r.pollIdle(sec(2.3), sec(2.3), poll, nc(100, 21))
			r.want(sec(2.8), r.poll(sec(2.8), nc(100, 21)), SoftStop) // quiet 1 s after the late ones
			st := r.d.Status(at(sec(2.8)))
			want := "3 new connections arrived up to 0.8s after routing was observed withdrawn (in-flight window 300ms; frontend web 3): a path hapsuper does not observe still sends here; confirmed"
			if st.Reason != ReasonUnverified || st.LateConnections != 3 {
				t.Fatalf("reason %s, late %d (%q), want unverified and 3", st.Reason, st.LateConnections, st.Detail)
			}
			if tc.routing.Balancer {
				want += "; last new connection 1.0s ago, last reading 0.0s ago"
			}
			if st.Detail != want {
				t.Fatalf("detail %q\nwant   %q", st.Detail, want)
			}
		})
	}
}

// Connections while routing is pending are not late, and a verdict that
// goes back to pending ends the spell: the next withdrawn verdict starts its
// own in-flight window.
func TestAuditSpellRestarts(t *testing.T) {
	r := serving(t, auditSettings)
	r.poll(0, nc(100, 10))
	r.stop(0)
	r.route(sec(0.5), RoutingWithdrawn, "confirmed")
	r.route(sec(0.6), RoutingPending, "fallback")
	r.want(sec(2), r.poll(sec(2), nc(100, 30)), None) // pending: expected
	r.route(sec(3), RoutingWithdrawn, "confirmed again")
	r.want(sec(3.2), r.poll(sec(3.2), nc(100, 31)), None) // in this spell's window
	r.pollIdle(sec(3.5), sec(4.1), poll, nc(100, 31))
	r.want(sec(4.2), r.poll(sec(4.2), nc(100, 31)), SoftStop)
	r.wantEnd(sec(4.2), ReasonRoutedAway, "confirmed again")
}

// A reload's new worker that has taken connections after the window counts
// them as late; a failed poll in between is no arrival.
func TestAuditNewWorkerAndFailedPoll(t *testing.T) {
	r := serving(t, auditSettings)
	r.poll(0, nc(100, 10))
	r.stop(0)
	r.route(sec(0.5), RoutingWithdrawn, "confirmed")
	r.want(sec(1), r.fail(sec(1)), None)
	if late := r.d.Observe(Observation{At: at(sec(1.5)), Workers: []Worker{nc(100, 10), nc(200, 2)}}); late != 2 {
		t.Fatalf("Observe returned %d late arrivals, want 2 (the new worker's)", late)
	}
	r.want(sec(1.5), r.d.Tick(at(sec(1.5))), None)
	if st := r.d.Status(at(sec(1.5))); st.LateConnections != 2 {
		t.Fatalf("LateConnections %d, want 2 (the new worker's)", st.LateConnections)
	}
}

// Late arrivals at the bound are named in its detail too.
func TestAuditNamedAtBound(t *testing.T) {
	r := serving(t, auditSettings)
	r.poll(0, nc(100, 0))
	r.stop(0)
	r.route(sec(0.5), RoutingWithdrawn, "confirmed")
	n := uint64(0)
	for off := sec(1); off < sec(20); off += poll {
		n++
		r.want(off, r.poll(off, nc(100, n)), None)
	}
	r.want(sec(20), r.poll(sec(20), nc(100, n+1)), SoftStop)
	st := r.d.Status(at(sec(20)))
	if st.Reason != ReasonBound || st.LateConnections != int(n+1) {
		t.Fatalf("reason %s late %d (%s), want bound and %d", st.Reason, st.LateConnections, st.Detail, n+1)
	}
	if want := "new connections arrived up to 19.5s after routing was observed withdrawn"; !contains(st.Detail, want) {
		t.Fatalf("detail %q does not say %q", st.Detail, want)
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}
