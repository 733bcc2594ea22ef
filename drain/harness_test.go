package drain

import (
	"errors"
	"testing"
	"time"
)

// t0 is the fake time base of every scenario; steps are durations from it.
var t0 = time.Unix(1e9, 0)

// at is the instant d after t0.
func at(d time.Duration) time.Time { return t0.Add(d) }

// poll is the interval of the scenarios' readings.
const poll = 500 * time.Millisecond

// sec is s seconds, for readable step tables.
func sec(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// settings are the timings of the scenarios: quiet 2s, bound 20s after the
// stop request, deadline 28s after it.
var settings = Settings{
	QuietPeriod: 2 * time.Second,
	MaxWait:     20 * time.Second,
	GracePeriod: 30 * time.Second,
	Margin:      2 * time.Second,
}

// errPoll is a failed poll of the master CLI.
var errPoll = errors.New("dial master socket: connection refused")

// run drives a Drain with the fake clock. Every step is at an offset from t0.
type run struct {
	t *testing.T
	d *Drain
}

// serving returns a run whose HAProxy is ready at t0.
func serving(t *testing.T, s Settings) *run {
	t.Helper()
	r := &run{t: t, d: New(s)}
	r.d.Ready(t0)
	return r
}

// w is a worker with its request counter, every request on a new connection
// (both counters move together).
func w(pid int, requests uint64) Worker {
	return Worker{PID: pid, Requests: requests, Connections: requests}
}

// ka is a worker whose counted requests (reqs) and new connections (conns)
// move apart, as kept-alive traffic does.
func ka(pid int, reqs, conns uint64) Worker {
	return Worker{PID: pid, Requests: reqs, Connections: conns}
}

// stop requests the stop at off and fails the test if it was refused.
func (r *run) stop(off time.Duration) {
	r.t.Helper()
	if !r.d.StopRequested(at(off)) {
		r.t.Fatalf("StopRequested(%v) = false, want true", off)
	}
}

// poll observes the workers at off, then ticks at off.
func (r *run) poll(off time.Duration, ws ...Worker) Action {
	r.d.Observe(Observation{At: at(off), Workers: ws})
	return r.d.Tick(at(off))
}

// fail observes a failed poll at off, then ticks at off.
func (r *run) fail(off time.Duration) Action {
	r.d.Observe(Observation{At: at(off), Err: errPoll})
	return r.d.Tick(at(off))
}

// route sets the routing condition at off.
func (r *run) route(off time.Duration, s RoutingState, detail string) {
	r.d.SetRouting(Routing{State: s, Why: note(detail)}, at(off))
}

// want fails the test when got is not the wanted action at off.
func (r *run) want(off time.Duration, got, want Action) {
	r.t.Helper()
	if got != want {
		st := r.d.Status(at(off))
		r.t.Fatalf("at %v: action %q, want %q (phase %s, reason %q, detail %q, conditions %+v)", off, got, want, st.Phase, st.Reason, st.Detail, st.Conditions)
	}
}

// wantEnd fails the test unless the drain ended with reason and detail.
func (r *run) wantEnd(off time.Duration, reason Reason, detail string) {
	r.t.Helper()
	st := r.d.Status(at(off))
	if st.Phase != Stopping || st.Reason != reason || st.Detail != detail {
		r.t.Fatalf("status %s/%q/%q, want %s/%q/%q", st.Phase, st.Reason, st.Detail, Stopping, reason, detail)
	}
	if !st.SoftStopAt.Equal(at(off)) {
		r.t.Fatalf("soft stop at %v, want %v", st.SoftStopAt.Sub(t0), off)
	}
}

// pollIdle polls unchanged workers from..to (inclusive) every step and wants None.
func (r *run) pollIdle(from, to, step time.Duration, ws ...Worker) {
	r.t.Helper()
	for off := from; off <= to; off += step {
		r.want(off, r.poll(off, ws...), None)
	}
}

// note is routing conditions that say a fixed text.
type note string

func (n note) Text() string { return string(n) }
