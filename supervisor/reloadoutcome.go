package supervisor

import (
	"fmt"
	"time"

	"github.com/hapsuper/hapsuper/runtimeapi"
	"github.com/hapsuper/hapsuper/status"
)

// reloads follows every reload of HAProxy from the request to its outcome,
// from what show proc says; it does no I/O. hapsuper's own reloads (SIGHUP,
// SIGUSR2) are checked with haproxy -c before they are sent (reloadCheck);
// a reload hapsuper did not send (a controller's `reload` on the master
// CLI) is seen when the master's reload count moves.
//
// A reload is ok once a worker never seen before is listed current and
// answers. It failed when the master counted it and no new worker came:
// at once when the master's [failed: N] rises (2.6 and 3.0 count every
// failure; 3.1+ says 1 after the first and stays there), else once no new
// worker came for reloadSettle after the count moved and none is listed
// still starting (unreachable: a 3.1+ worker loading its configuration or
// retrying a bind, up to reloadTimeout), or when the master counted no
// reload reloadTimeout after hapsuper's SIGUSR2. A failed
// reload leaves the old worker serving: HAProxy 2.6 and 3.0 keep it
// current, 3.1+ lists it under "old workers" (status shows it current,
// see poller.observe).
type reloads struct {
	counted int          // the master's reload count as last seen; -1: no sample yet
	failed  int          // the master's [failed: N] as last seen
	seen    map[int]bool // every worker pid seen so far
	totals  status.Reloads

	check *status.Reload // the reload being checked (haproxy -c runs), or nil
	held  bool           // check passed before the master's reload count was first read: sent once it is

	// The reload sent or seen whose outcome is awaited, or nil.
	inflight  *status.Reload
	sentAt    time.Time // when hapsuper sent SIGUSR2 (zero: a reload it did not send)
	countedAt time.Time // when the master's count moved for it (zero: not yet)
	failedAt  int       // the master's [failed: N] when it was sent

	// The configuration's warnings as the last reload that landed left
	// them (reinspect.go), sorted and joined; inspected: one was read.
	warnings  string
	inspected bool

	// Who waits for an outcome (reloads asked over the status socket):
	// for the next check (queued), the check under way, and the reload in
	// flight. Each is answered once, when the reload that serves it ends.
	asks struct{ queued, check, inflight []status.ReloadAsk }
}

// How long a reload may take to show its outcome (see reloads).
const (
	reloadSettle  = 2 * time.Second
	reloadTimeout = 10 * time.Second
)

func newReloads() *reloads { return &reloads{counted: -1, seen: map[int]bool{}} }

// counting reports whether the master's reload count has a baseline: a
// reload after the first successful sample is seen as one.
func (r *reloads) counting() bool { return r.counted >= 0 }

// checking records a reload asked of hapsuper, whose check starts now.
func (r *reloads) checking(now time.Time, origin string) {
	r.check = &status.Reload{At: now, Result: status.ReloadChecking, Origin: origin}
	r.asks.check, r.asks.queued = append(r.asks.check, r.asks.queued...), nil
}

// wait has ask answered by the next reload checked: a check under way
// read the files before ask came, so it does not serve it.
func (r *reloads) wait(ask status.ReloadAsk) { r.asks.queued = append(r.asks.queued, ask) }

// abandon answers every ask not yet sent (queued or being checked) with
// why no reload serves it.
func (r *reloads) abandon(why string) {
	answer(append(r.asks.queued, r.asks.check...), status.ReloadReply{Error: why})
	r.asks.queued, r.asks.check = nil, nil
}

// answer sends reply to every ask; Done is buffered, the send never blocks.
func answer(asks []status.ReloadAsk, reply status.ReloadReply) {
	for _, a := range asks {
		select {
		case a.Done <- reply:
		default:
		}
	}
}

// refused ends the reload being checked: its check failed and nothing was
// sent. It returns the ended reload.
func (r *reloads) refused(now time.Time, detail string) status.Reload {
	rec := r.check
	r.check = nil
	if rec == nil {
		rec = &status.Reload{At: now, Origin: "SIGUSR2"}
	}
	r.totals.Last = rec
	ended := r.end(rec, now, status.ReloadRefused, 0, detail)
	answer(r.asks.check, status.ReloadReply{Reload: &ended})
	r.asks.check = nil
	return ended
}

// dropped forgets the reload being checked: it passed, but HAProxy is
// stopping by then, so it was not sent.
func (r *reloads) dropped() {
	r.check = nil
	answer(r.asks.check, status.ReloadReply{Error: "the reload passed its check, but HAProxy is stopping by now: it was not sent"})
	r.asks.check = nil
}

// sent records the SIGUSR2 of the reload that was checked. A reload under
// way is superseded: the outcome seen next is this one's, and whoever
// waited for the superseded one gets it (it serves the files they wrote).
func (r *reloads) sent(now time.Time) {
	rec := r.check
	r.check = nil
	if rec == nil {
		rec = &status.Reload{At: now, Origin: "SIGUSR2"}
	}
	rec.Result = status.ReloadReloading
	r.totals.Last, r.inflight = rec, rec
	r.asks.inflight, r.asks.check = append(r.asks.inflight, r.asks.check...), nil
	r.sentAt, r.countedAt, r.failedAt = now, time.Time{}, r.failed
}

// underway reports whether a reload waits for its outcome: the poller
// should poll fast.
func (r *reloads) underway() bool {
	return r.check != nil || r.inflight != nil
}

// observe takes one successful sample. It returns the reload it ended, if
// any.
func (r *reloads) observe(now time.Time, s runtimeapi.Sample) (status.Reload, bool) {
	defer r.remember(s)
	if r.counted < 0 {
		r.counted, r.failed = s.Master.Reloads, s.Master.FailedReloads
		return status.Reload{}, false
	}
	moved := s.Master.Reloads > r.counted
	if moved && r.inflight == nil {
		// A reload hapsuper did not send.
		r.inflight = &status.Reload{At: now, Result: status.ReloadReloading, Origin: "master CLI"}
		r.totals.Last, r.sentAt, r.failedAt = r.inflight, time.Time{}, r.failed
	}
	if moved {
		r.countedAt = now
	}
	r.counted, r.failed = s.Master.Reloads, s.Master.FailedReloads
	if r.inflight == nil {
		return status.Reload{}, false
	}
	if w, ok := r.newWorker(s); ok && !r.countedAt.IsZero() {
		return r.finish(now, status.ReloadOK, w, ""), true
	}
	loading := len(s.Unreachable) > 0 // a new worker still starts (3.1+ lists it so), or retries its binds
	switch {
	case r.countedAt.IsZero() && !r.sentAt.IsZero() && now.Sub(r.sentAt) >= reloadTimeout:
		return r.finish(now, status.ReloadFailed, 0, fmt.Sprintf("the master counted no reload %s after SIGUSR2: it did not take the signal (HAProxy 3.2.9-3.2.10 and 3.3.0-3.3.1 leave signals pending after a failed reload: upgrade)", reloadTimeout)), true
	case r.countedAt.IsZero():
		return status.Reload{}, false
	case s.Master.FailedReloads > r.failedAt, now.Sub(r.countedAt) >= reloadSettle && (!loading || now.Sub(r.countedAt) >= reloadTimeout):
		return r.finish(now, status.ReloadFailed, 0, "HAProxy did not load the new configuration (its alerts are in the log above): "+serving(s)), true
	}
	return status.Reload{}, false
}

// newWorker returns a current worker that was not there before the reload
// and answered the sample (a worker still loading does not). It may be
// stopping already: a soft stop that came just after the reload.
func (r *reloads) newWorker(s runtimeapi.Sample) (int, bool) {
	for _, w := range s.Workers {
		if !w.Process.Old && !r.seen[w.Process.PID] {
			return w.Process.PID, true
		}
	}
	return 0, false
}

func (r *reloads) remember(s runtimeapi.Sample) {
	for _, w := range s.Workers {
		r.seen[w.Process.PID] = true
	}
	for _, p := range s.Skipped {
		r.seen[p.PID] = true
	}
}

// finish ends the reload in flight.
func (r *reloads) finish(now time.Time, res status.ReloadResult, worker int, detail string) status.Reload {
	rec := r.inflight
	r.inflight = nil
	ended := r.end(rec, now, res, worker, detail)
	answer(r.asks.inflight, status.ReloadReply{Reload: &ended})
	r.asks.inflight = nil
	return ended
}

// end sets rec's outcome and counts it.
func (r *reloads) end(rec *status.Reload, now time.Time, res status.ReloadResult, worker int, detail string) status.Reload {
	rec.Result, rec.Ended, rec.Worker, rec.Detail = res, now, worker, detail
	switch res {
	case status.ReloadOK:
		r.totals.OK++
	case status.ReloadRefused:
		r.totals.Refused++
	case status.ReloadFailed:
		r.totals.Failed++
	}
	return *rec
}

// snapshot is the reloads as status shows them, the one being checked as
// the last; the caller may keep it.
func (r *reloads) snapshot() status.Reloads {
	t := r.totals
	if r.check != nil {
		t.Last = r.check
	}
	if t.Last != nil {
		last := *t.Last
		t.Last = &last
	}
	return t
}

// serving names the workers that serve in s: the ones not stopping.
func serving(s runtimeapi.Sample) string {
	var pids []int
	for _, w := range s.Workers {
		if !w.Info.Stopping {
			pids = append(pids, w.Process.PID)
		}
	}
	if len(pids) == 0 {
		return "no worker serves"
	}
	return fmt.Sprintf("worker %v still serves the previous configuration", pids)
}

// refusedNow records a reload asked now whose check could not start.
func (r *reloads) refusedNow(now time.Time, origin, detail string) status.Reload {
	r.checking(now, origin)
	return r.refused(now, detail)
}
