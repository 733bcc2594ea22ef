package drain

import (
	"strings"
	"testing"
)

// gw is a worker whose frontend web accepted opened connections (conn_tot)
// and counted reqs requests on them, with sessions open.
func gw(pid int, opened, reqs uint64, sessions int64) Worker {
	return Worker{PID: pid, Requests: opened + reqs, Connections: opened, Sessions: sessions,
		Accepted: map[string]uint64{"web": opened}, Opened: map[string]uint64{"web": opened}}
}

// reload observes a successful reading at off after a reload count of n.
func (r *run) reload(off float64, n int, ws ...Worker) Action {
	r.d.Observe(Observation{At: at(sec(off)), Workers: ws, Reloads: n})
	return r.d.Tick(at(sec(off)))
}

// A reload while the master CLI refuses: the old worker leaves unseen, its
// stop line says it accepted nothing since its last reading, and it had no
// session; the new worker starts at zero. Nothing was hidden, so quiet
// holds the period after the stop, as without the reload.
func TestReloadWhileBlindWithItsStopLineIsNoChange(t *testing.T) {
	for _, lineAt := range []float64{1.05, 1.3} { // before the reading after the spell, and after it
		r := serving(t, settings)
		r.reload(0, 0, gw(100, 5, 5, 0))
		r.stop(0)
		r.want(sec(1), r.fail(sec(1)), None)
		if lineAt < 1.1 {
			r.d.WorkerStopped(100, "web", 5, at(sec(lineAt)))
		}
		r.want(sec(1.1), r.reload(1.1, 1, gw(200, 0, 0, 0)), None)
		if lineAt > 1.1 {
			if d := r.d.Status(at(sec(1.2))).Conditions[0].Detail; !strings.Contains(d, "1 workers left while the counters were unreadable") {
				t.Fatalf("quiet detail %q, want the wait for the stop line", d)
			}
			r.d.WorkerStopped(100, "web", 5, at(sec(lineAt)))
		}
		r.want(sec(1.9), r.reload(1.9, 1, gw(200, 0, 0, 0)), None)
		r.want(sec(2), r.reload(2, 1, gw(200, 0, 0, 0)), SoftStop)
		r.wantEnd(sec(2), ReasonQuiet, "")
	}
}

// The stop line shows connections accepted after the last reading: traffic
// the spell hid, a change at the reading that found the worker gone.
func TestReloadWhileBlindHidingConnections(t *testing.T) {
	r := serving(t, settings)
	r.reload(0, 0, gw(100, 5, 5, 0))
	r.stop(0)
	r.want(sec(1), r.fail(sec(1)), None)
	r.d.WorkerStopped(100, "web", 7, at(sec(1.05)))
	r.want(sec(1.1), r.reload(1.1, 1, gw(200, 0, 0, 0)), None)
	r.want(sec(3), r.reload(3, 1, gw(200, 0, 0, 0)), None)
	r.want(sec(3.1), r.reload(3.1, 1, gw(200, 0, 0, 0)), SoftStop)
}

// No stop line within stopLineWait (HAProxy quiet, a worker killed): the
// spell counts as a change at the reading that found the worker gone.
func TestReloadWhileBlindWithoutStopLine(t *testing.T) {
	r := serving(t, settings)
	r.reload(0, 0, gw(100, 5, 5, 0))
	r.stop(0)
	r.want(sec(1), r.fail(sec(1)), None)
	r.want(sec(1.1), r.reload(1.1, 1, gw(200, 0, 0, 0)), None)
	r.want(sec(2), r.reload(2, 1, gw(200, 0, 0, 0)), None)
	r.want(sec(3.1), r.reload(3.1, 1, gw(200, 0, 0, 0)), SoftStop)
	// A late line changes nothing once judged.
	r.d.WorkerStopped(100, "web", 5, at(sec(3.2)))
}

// Sessions open at the old worker's last reading may have carried
// requests: Requests changed, unseen. Once routing is withdrawn and every
// frontend's soft stop is graceful, those requests are no new connections.
func TestReloadWhileBlindWithSessions(t *testing.T) {
	r := serving(t, settings)
	r.reload(0, 0, gw(100, 5, 5, 2))
	r.stop(0)
	r.want(sec(1), r.fail(sec(1)), None)
	r.d.WorkerStopped(100, "web", 5, at(sec(1.05)))
	r.want(sec(1.1), r.reload(1.1, 1, gw(200, 0, 0, 0)), None)
	r.want(sec(2), r.reload(2, 1, gw(200, 0, 0, 0)), None) // the requests' clock moved at 1.1 s
	r.route(sec(2), RoutingWithdrawn, "")
	r.want(sec(2.1), r.reload(2.1, 1, gw(200, 0, 0, 0)), SoftStop) // the connections' did not
	r.wantEnd(sec(2.1), ReasonRoutedAway, "")
}

// Two reloads in one blind spell and one new worker seen: a worker may have
// come and gone unseen.
func TestReloadsOutnumberNewWorkers(t *testing.T) {
	r := serving(t, settings)
	r.reload(0, 0, gw(100, 5, 5, 0))
	r.stop(0)
	r.want(sec(1), r.fail(sec(1)), None)
	r.d.WorkerStopped(100, "web", 5, at(sec(1.05)))
	r.want(sec(1.1), r.reload(1.1, 2, gw(300, 0, 0, 0)), None)
	r.want(sec(2), r.reload(2, 2, gw(300, 0, 0, 0)), None)
	r.want(sec(3.1), r.reload(3.1, 2, gw(300, 0, 0, 0)), SoftStop)
}

// A reload that makes a frontend graceful (or adds one the inspection has
// not read yet) changes what Connections sums: its fall is no reset, and
// its rise no new connection, unless Requests moved too.
func TestUngracefulSetChangeIsNoChange(t *testing.T) {
	s := settings
	s.UngracefulFrontends = []string{"web"}
	r := serving(t, s)
	obs := func(off float64, conns uint64, ungraceful ...string) Action {
		r.d.Observe(Observation{At: at(sec(off)), Ungraceful: append([]string{}, ungraceful...),
			Workers: []Worker{{PID: 100, Requests: 20, Connections: conns}}})
		return r.d.Tick(at(sec(off)))
	}
	obs(0, 20, "web")
	r.stop(0)
	r.route(0, RoutingWithdrawn, "")
	r.want(sec(1), obs(1, 10), None) // web graceful now: stot only
	r.want(sec(1.5), obs(1.5, 20, "api", "web"), None)
	r.want(sec(2), obs(2, 20, "api", "web"), SoftStop)
}

// A reload's new worker still loading (listed, not read) is a worker that
// exists: with the old one's stop line, nothing was hidden.
func TestReloadWhileBlindNewWorkerStillLoading(t *testing.T) {
	r := serving(t, settings)
	r.reload(0, 0, gw(100, 5, 5, 0))
	r.stop(0)
	r.want(sec(1), r.fail(sec(1)), None)
	r.d.WorkerStopped(100, "web", 5, at(sec(1.05)))
	r.d.Observe(Observation{At: at(sec(1.1)), Reloads: 1, Loading: []int{200}})
	r.want(sec(1.1), r.d.Tick(at(sec(1.1))), None)
	r.want(sec(2), r.reload(2, 1, gw(200, 0, 0, 0)), SoftStop)
}
