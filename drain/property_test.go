package drain

import (
	"math/rand/v2"
	"slices"
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
	s         Settings
	counts    map[int]uint64 // last successful reading, nil before the first
	conns     map[int]uint64 // the same for Connections
	blind     bool           // last reading failed, or none yet
	reloading bool           // the last reading failed while HAProxy reloads
	change    time.Time      // last change of Requests (stop request included)
	cchange   time.Time      // last change of Connections (stop request included)
	lastOK    time.Time
	stopAt    time.Time
	routing   RoutingState
	// cchanges are the instants of every change of Connections (the stop
	// request included), for the confirmed rule; evidence is the earliest
	// date of the current confirmed spell, zero while not confirmed.
	cchanges []time.Time
	evidence time.Time
	apiOnly  bool
	// Stop lines: delivered ones per PID (of workers seen), and the
	// workers gone during a blind spell awaiting theirs, from goneAt.
	lines    map[int]uint64
	gone     map[int]uint64
	goneAt   time.Time
	soft     time.Time // when SoftStop was returned
	hard     bool
	exited   bool
	stopping bool
}

func (o *oracle) observe(at time.Time, ws []Worker, err error, reloading bool) {
	if err != nil {
		o.blind, o.reloading = true, reloading
		return
	}
	o.reloading = false
	// After a failed reading (or before any), a change unless every worker
	// of the last successful reading is still there or left with a stop
	// line showing no connection since (none of these has sessions). One
	// whose line has not come holds quiet until it comes or 500 ms pass.
	hidden := o.blind && o.counts == nil
	if o.blind && o.counts != nil {
		for pid, last := range o.conns {
			if slices.ContainsFunc(ws, func(w Worker) bool { return w.PID == pid }) {
				continue
			}
			if final, ok := o.lines[pid]; ok {
				hidden = hidden || final != last
				continue
			}
			if o.gone == nil {
				o.gone = map[int]uint64{}
			}
			o.gone[pid], o.goneAt = last, at
		}
	}
	changed, cchanged := hidden, hidden
	next, cnext := map[int]uint64{}, map[int]uint64{}
	for _, w := range ws {
		prev, ok := o.counts[w.PID]
		if (ok && prev != w.Requests) || (!ok && o.counts != nil && w.Requests > 0) {
			changed = true
		}
		cprev, ok := o.conns[w.PID]
		if (ok && cprev != w.Connections) || (!ok && o.conns != nil && w.Connections > 0) {
			cchanged = true
		}
		next[w.PID], cnext[w.PID] = w.Requests, w.Connections
	}
	if changed && at.After(o.change) {
		o.change = at
	}
	if cchanged && at.After(o.cchange) {
		o.cchange = at
	}
	if cchanged {
		o.cchanges = append(o.cchanges, at)
	}
	o.counts, o.conns, o.blind, o.lastOK = next, cnext, false, at
	o.settle(at)
}

// line delivers a stop line: kept for a worker of the last successful
// reading, or one awaiting its line.
func (o *oracle) line(pid int, final uint64, now time.Time) {
	_, seen := o.conns[pid]
	_, waiting := o.gone[pid]
	if !seen && !waiting {
		return
	}
	if o.lines == nil {
		o.lines = map[int]uint64{}
	}
	o.lines[pid] = max(o.lines[pid], final)
	o.settle(now)
}

// settle: a gone worker whose line came with a connection since, or whose
// line did not come within 500 ms, is a change of both counters at the
// reading that found it gone.
func (o *oracle) settle(now time.Time) {
	for pid, last := range o.gone {
		final, ok := o.lines[pid]
		switch {
		case ok && final == last:
		case ok, !now.Before(o.goneAt.Add(500 * time.Millisecond)):
			if o.goneAt.After(o.change) {
				o.change = o.goneAt
			}
			if o.goneAt.After(o.cchange) {
				o.cchange = o.goneAt
			}
			o.cchanges = append(o.cchanges, o.goneAt)
		default:
			continue
		}
		delete(o.gone, pid)
	}
}

// quiet: the latest reading succeeded and came the period after the last
// change, which is never before the stop request. Once routing is
// withdrawn, the connections' change and WithdrawnQuietPeriod decide.
func (o *oracle) quiet(now time.Time) bool {
	end := o.quietEnd()
	return !o.blind && len(o.gone) == 0 && !o.lastOK.Before(end) && !now.Before(end)
}

// quietEnd is when quiet can hold. Where routing is confirmed: the later of
// the evidence plus the allowance and the period after the last change
// shown after it (the stop request counting as one, if not before it
// either); changes are tracked from the stop request on.
func (o *oracle) quietEnd() time.Time {
	switch {
	case o.routing != RoutingWithdrawn:
		return o.change.Add(o.s.QuietPeriod)
	case o.evidence.IsZero():
		return o.cchange.Add(o.s.WithdrawnQuietPeriod)
	}
	explained := o.evidence.Add(o.s.InFlightAllowance)
	end := explained
	for _, c := range append([]time.Time{o.stopAt}, o.cchanges...) {
		if c.Before(o.stopAt) || !c.After(explained) {
			continue
		}
		if e := c.Add(o.s.WithdrawnQuietPeriod); e.After(end) {
			end = e
		}
	}
	return end
}

func checkRandomDrain(t *testing.T, seed uint64) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	ms := func(lo, hi int) time.Duration { return time.Duration(lo+rng.IntN(hi-lo+1)) * time.Millisecond }
	s := Settings{QuietPeriod: ms(300, 3000), Margin: ms(0, 2000)}
	s.WithdrawnQuietPeriod = ms(100, int(s.QuietPeriod/time.Millisecond))
	s.InFlightAllowance = ms(0, 400)
	s.MaxWait = s.QuietPeriod + ms(0, 12000)
	s.GracePeriod = s.MaxWait + s.Margin + ms(0, 10000)

	d := New(s)
	o := &oracle{s: s, blind: true, routing: RoutingOff}
	workers := map[int]uint64{100: 0} // Requests per PID
	conns := map[int]uint64{100: 0}   // Connections per PID: a part of the same traffic
	nextPID := 101
	now := t0
	type stopLine struct {
		pid   int
		final uint64
	}
	var later []stopLine // stop lines delivered at a later step
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
			o.stopAt, o.change, o.cchange = now, now, now
		}
		if len(later) > 0 && rng.IntN(2) == 0 {
			l := later[0]
			later = later[1:]
			d.WorkerStopped(l.pid, "web", l.final, now)
			o.line(l.pid, l.final, now)
		}
		switch p := rng.IntN(100); {
		case p < 50:
			for pid, n := range workers {
				switch q := rng.IntN(100); {
				case q < 25: // kept-alive requests, some on new connections
					more := uint64(1 + rng.IntN(3))
					workers[pid] = n + more
					if rng.IntN(3) == 0 {
						conns[pid] += uint64(1 + rng.IntN(int(more)))
					}
				case q < 27:
					workers[pid], conns[pid] = n/2, conns[pid]/2
				case q < 30:
					// Its stop line (a connection unseen, or none) comes
					// now, later, or never.
					l := stopLine{pid, conns[pid] + uint64(max(0, rng.IntN(4)-1))}
					switch rng.IntN(3) {
					case 0:
						d.WorkerStopped(l.pid, "web", l.final, now)
						o.line(l.pid, l.final, now)
					case 1:
						later = append(later, l)
					}
					delete(workers, pid)
					delete(conns, pid)
				}
			}
			if rng.IntN(10) == 0 {
				workers[nextPID] = uint64(rng.IntN(2))
				conns[nextPID] = workers[nextPID]
				nextPID++
			}
			var ws []Worker
			for pid, n := range workers {
				ws = append(ws, Worker{PID: pid, Requests: n, Connections: conns[pid], Opened: map[string]uint64{"web": conns[pid]}})
			}
			d.Observe(Observation{At: now, Workers: ws})
			o.observe(now, ws, nil, false)
		case p < 58:
			reloading := rng.IntN(2) == 0
			d.Observe(Observation{At: now, Err: errPoll, Reloading: reloading})
			o.observe(now, nil, errPoll, reloading)
		case p < 63:
			st := []RoutingState{RoutingOff, RoutingPending, RoutingWithdrawn, RoutingUnverified, RoutingWithdrawn}[rng.IntN(5)]
			r := Routing{State: st}
			if st == RoutingWithdrawn && rng.IntN(2) == 0 {
				// Confirmed by kube-proxy, its syncs dated up to 2 s
				// back (or later than the verdict, or not at all).
				r.Confirmed = true
				if rng.IntN(5) > 0 {
					r.SyncedBy = now.Add(ms(-2000, 200))
				}
				if rng.IntN(10) == 0 {
					r.APIOnly = true // never confirmed
				}
			}
			d.SetRouting(r, now)
			o.routing, o.apiOnly = st, r.APIOnly
			if ev := now; r.Confirmed && !r.APIOnly {
				if !r.SyncedBy.IsZero() && r.SyncedBy.Before(now) {
					ev = r.SyncedBy
				}
				if o.evidence.IsZero() || ev.Before(o.evidence) {
					o.evidence = ev
				}
			} else {
				o.evidence = time.Time{}
			}
		case p < 65:
			d.SetPodGracePeriod(ms(0, 32000))
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
				floor := s.QuietPeriod
				if o.routing == RoutingWithdrawn {
					floor = s.WithdrawnQuietPeriod
				}
				if !o.evidence.IsZero() {
					// Confirmed: never before the evidence plus the
					// allowance, nor the period after a change shown later.
					floor = 0
					if ends && now.Before(o.evidence.Add(s.InFlightAllowance)) {
						fail("soft stop %v before the confirmation's evidence %v + allowance", now.Sub(t0), o.evidence.Sub(t0))
					}
				}
				if ends && now.Before(o.stopAt.Add(floor)) {
					fail("soft stop %v after the stop request, before the quiet period of routing %s", now.Sub(o.stopAt), o.routing)
				}
				want := routingReason(Routing{State: o.routing, APIOnly: o.apiOnly})
				if !ends {
					want = ReasonBound
					// HAProxy answers (a recent reading, the last one
					// good), or its last poll failed while it reloads.
					answering := !o.blind && !o.lastOK.Before(now.Add(-s.QuietPeriod)) || o.blind && o.reloading
					if !answering {
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
