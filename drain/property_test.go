package drain

import (
	"math/rand/v2"
	"testing"
	"time"
)

// TestProperties runs random sequences of readings, failures, routing
// changes, deadlines and ticks against an oracle written from the spec.
func TestProperties(t *testing.T) {
	for seed := range uint64(3000) {
		checkRandomDrain(t, seed)
		if t.Failed() {
			return
		}
	}
}

// FuzzDrain explores more sequences: go test -fuzz=FuzzDrain ./drain/.
func FuzzDrain(f *testing.F) {
	for _, s := range []uint64{0, 1, 42, 1 << 40} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, seed uint64) { checkRandomDrain(t, seed) })
}

// oracle is what the spec says from the inputs alone.
type oracle struct {
	s        Settings
	counts   map[int]uint64 // last successful reading, nil before the first
	blind    bool           // last reading failed, or none yet
	change   time.Time      // last change (stop request included)
	lastOK   time.Time
	stopAt   time.Time
	routing  RoutingState
	soft     time.Time // when SoftStop was returned
	hard     bool
	exited   bool
	stopping bool
}

func (o *oracle) observe(at time.Time, ws []Worker, err error) {
	if err != nil {
		o.blind = true
		return
	}
	changed := o.blind
	next := map[int]uint64{}
	for _, w := range ws {
		prev, ok := o.counts[w.PID]
		if (ok && prev != w.Requests) || (!ok && o.counts != nil && w.Requests > 0) {
			changed = true
		}
		next[w.PID] = w.Requests
	}
	if changed && at.After(o.change) {
		o.change = at
	}
	o.counts, o.blind, o.lastOK = next, false, at
}

// quiet: the latest reading succeeded and came QuietPeriod after the last
// change, which is never before the stop request.
func (o *oracle) quiet(now time.Time) bool {
	end := o.change.Add(o.s.QuietPeriod)
	return !o.blind && !o.lastOK.Before(end) && !now.Before(end)
}

func checkRandomDrain(t *testing.T, seed uint64) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	ms := func(lo, hi int) time.Duration { return time.Duration(lo+rng.IntN(hi-lo+1)) * time.Millisecond }
	s := Settings{QuietPeriod: ms(300, 3000), Margin: ms(0, 2000)}
	s.MaxWait = s.QuietPeriod + ms(0, 12000)
	s.GracePeriod = s.MaxWait + s.Margin + ms(0, 10000)

	d := New(s)
	o := &oracle{s: s, blind: true, routing: RoutingOff}
	workers := map[int]uint64{100: 0}
	nextPID := 101
	now := t0
	stopStep := rng.IntN(40)
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("seed %d settings %+v at %v: "+format, append([]any{seed, s, now.Sub(t0)}, args...)...)
	}
	for step := range 400 {
		now = now.Add(ms(0, 700))
		if step == stopStep {
			if !d.StopRequested(now) {
				fail("StopRequested refused")
			}
			o.stopAt, o.change = now, now
		}
		switch p := rng.IntN(100); {
		case p < 50:
			for pid, n := range workers {
				switch q := rng.IntN(100); {
				case q < 25:
					workers[pid] = n + uint64(1+rng.IntN(3))
				case q < 27:
					workers[pid] = n / 2
				case q < 30:
					delete(workers, pid)
				}
			}
			if rng.IntN(10) == 0 {
				workers[nextPID] = uint64(rng.IntN(2))
				nextPID++
			}
			var ws []Worker
			for pid, n := range workers {
				ws = append(ws, Worker{PID: pid, Requests: n})
			}
			d.Observe(Observation{At: now, Workers: ws})
			o.observe(now, ws, nil)
		case p < 58:
			d.Observe(Observation{At: now, Err: errPoll})
			o.observe(now, nil, errPoll)
		case p < 63:
			st := []RoutingState{RoutingOff, RoutingPending, RoutingWithdrawn, RoutingUnverified}[rng.IntN(4)]
			d.SetRouting(Routing{State: st}, now)
			o.routing = st
		case p < 65:
			d.SetDeadline(now.Add(ms(-2000, 30000)))
		case p < 66 && step > stopStep+20:
			d.MasterExited(now)
			o.exited = true
		}
		st := d.Status(now)
		act := d.Tick(now)
		if !o.stopAt.IsZero() {
			if st.BoundAt.Before(o.stopAt) || st.Deadline.After(o.stopAt.Add(s.GracePeriod-s.Margin)) ||
				(!st.Deadline.Before(o.stopAt) && st.BoundAt.After(st.Deadline)) {
				fail("bound %v deadline %v out of order", st.BoundAt.Sub(t0), st.Deadline.Sub(t0))
			}
		}
		switch {
		case o.exited || o.stopAt.IsZero():
			if act != None {
				fail("action %q without a drain under way", act)
			}
		case !o.stopping:
			ends := o.quiet(now) && routingMet(Routing{State: o.routing})
			if want := ends || !now.Before(st.BoundAt); (act == SoftStop) != want {
				fail("action %q, want soft stop %v (quiet %v routing %s bound %v)", act, want, o.quiet(now), o.routing, st.BoundAt.Sub(t0))
			}
			if act == SoftStop {
				o.stopping, o.soft = true, now
				got := d.Status(now)
				if ends && now.Before(o.stopAt.Add(s.QuietPeriod)) {
					fail("soft stop %v after the stop request, before QuietPeriod", now.Sub(o.stopAt))
				}
				want := routingReason(Routing{State: o.routing})
				if !ends {
					want = ReasonBound
					if o.blind || o.lastOK.Before(now.Add(-s.QuietPeriod)) {
						want = ReasonUnavailable
					}
				}
				if got.Reason != want {
					fail("reason %s, want %s", got.Reason, want)
				}
			}
		default:
			if want := !o.hard && !now.Before(st.Deadline); (act == HardStop) != want {
				fail("action %q in stopping, want hard stop %v (deadline %v)", act, want, st.Deadline.Sub(t0))
			}
			if act == HardStop {
				o.hard = true
			}
		}
	}
}
