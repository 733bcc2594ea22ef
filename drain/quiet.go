package drain

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// change says what last moved a quiet clock, for the detail of a result.
type change int

const (
	changeNone    change = iota // nothing yet
	changeStop                  // the stop request itself: quiet starts counting there
	changeRequest               // a worker's counter rose (or a new worker had traffic)
	changeReset                 // a worker's counter went down: a reset, treated as traffic
	changeBlind                 // the first reading after a failed one (or the first ever)
)

// clock is one quiet clock: the last instant something it counts may have
// happened, and what it was.
type clock struct {
	last  time.Time
	cause change
}

// mark moves the clock forward to at; it never moves back, so a reading
// taken before the stop request but delivered after it changes nothing.
func (c *clock) mark(at time.Time, why change) {
	if at.Before(c.last) {
		return
	}
	c.last, c.cause = at, why
}

// counts are one worker's two counters at a reading.
type counts struct{ requests, connections uint64 }

// stopLineWait bounds how long the first reading after a blind spell waits
// for the stop lines of the workers that left during it (WorkerStopped):
// HAProxy writes them as each worker stops accepting, before it exits, so
// they come with the readings that follow; without them the spell may have
// hidden traffic, and counts as a change.
const stopLineWait = 500 * time.Millisecond

// quiet tracks HAProxy's workers' counters per PID and keeps two clocks:
// every counted request and connection (Worker.Requests), and what still
// counts once routing is withdrawn (Worker.Connections: new connections,
// and the requests of frontends whose soft stop is not graceful).
//
// A clock moves to the At of an observation that shows a change of its
// counter. Traffic is judged across generations: a worker's counters are
// compared with its own last reading, a new worker's (a reload's, from
// zero) added, a worker that left keeps what it was seen to count.
//
// Not seeing is a possible change of both, unless the readings around it
// account for every worker: before the first successful observation the
// next one moves both clocks; after failed ones (a master CLI that refuses
// while the master re-executes for a reload) the next successful one
// compares each worker seen on both sides, counts a new worker's traffic,
// and judges a worker that left in between by its stop line
// (WorkerStopped): its frontends accepted nothing since its last reading,
// and it had no session then. A worker whose line has not come holds quiet
// for up to stopLineWait, then counts as a change; one whose line shows a
// new connection, or that had sessions, is a change; more reloads than new
// workers is one (a worker may have come and gone unseen). A reload alone
// therefore never restarts quiet, and blindness never lets traffic go
// unseen. Quiet is only ever proved by a reading: the counters read at
// least period after the last change are unchanged.
type quiet struct {
	period          time.Duration // for Requests
	withdrawnPeriod time.Duration // for Connections, once routing is withdrawn
	requestsOnly    []string      // counted frontends whose requests count once withdrawn too

	counts    map[int]counts // per PID at the last successful observation
	blind     bool           // no successful observation since the last failure (or ever)
	all       clock          // Requests
	conns     clock          // Connections
	lastOK    time.Time      // At of the last successful observation
	lastErr   error          // error of the last observation, nil when it succeeded
	lastErrAt time.Time      // At of the first failure of the current blind spell
	reloading bool           // the last observation failed while HAProxy reloads (Observation.Reloading)
	workers   []Worker       // workers of the last successful observation
	reloads   int            // Observation.Reloads of the last successful observation

	stops      map[int]map[string]uint64 // stop lines of the workers last seen or gone: conn_tot per frontend
	gone       map[int]Worker            // workers that left during a blind spell, awaiting their stop lines
	goneAt     time.Time                 // the reading that found them gone
	ungraceful []string                  // Observation.Ungraceful as last given
}

func newQuiet(s Settings) quiet {
	wp := s.WithdrawnQuietPeriod
	if wp <= 0 {
		wp = s.QuietPeriod
	}
	return quiet{period: s.QuietPeriod, withdrawnPeriod: wp, requestsOnly: slices.Clone(s.UngracefulFrontends), blind: true,
		ungraceful: slices.Clone(s.UngracefulFrontends)}
}

// start moves both clocks to the stop request: what came before it does not
// matter, and a drain lasts at least one period.
func (q *quiet) start(at time.Time) {
	q.all.mark(at, changeStop)
	q.conns.mark(at, changeStop)
}

// observe applies one poll. For each counter: a worker whose counter rose, a
// worker seen for the first time with traffic (a new worker from a reload
// starts at zero), or a counter that went down (a reset) is a change; a
// worker that is gone is not, unless it left while the tracker was blind
// and cannot be accounted for (see quiet). A failed poll makes the tracker
// blind until the next successful one.
func (q *quiet) observe(o Observation) {
	if o.Err != nil {
		if !q.blind || q.lastErr == nil {
			q.lastErrAt = o.At
		}
		q.blind, q.lastErr, q.reloading = true, o.Err, o.Reloading
		return
	}
	all, conns := changeNone, changeNone
	next := make(map[int]counts, len(o.Workers))
	fresh := 0
	for _, pid := range o.Loading {
		if _, known := q.counts[pid]; !known {
			fresh++
		}
	}
	for _, w := range o.Workers {
		prev, known := q.counts[w.PID]
		if !known {
			fresh++
		}
		all = counterChange(all, known, q.counts != nil, prev.requests, w.Requests)
		conns = counterChange(conns, known, q.counts != nil, prev.connections, w.Connections)
		next[w.PID] = counts{w.Requests, w.Connections}
	}
	if o.Ungraceful != nil && !slices.Equal(o.Ungraceful, q.ungraceful) {
		// Connections is summed over another set of frontends now: a
		// change of it is one of Requests, which holds every request.
		q.ungraceful, q.requestsOnly, conns = slices.Clone(o.Ungraceful), slices.Clone(o.Ungraceful), all
	}
	if q.blind {
		reqs, cs := true, true // the first reading ever
		if q.counts != nil {
			reqs, cs = q.unseen(o, next, fresh)
		}
		if reqs && all == changeNone {
			all = changeBlind
		}
		if cs && conns == changeNone {
			conns = changeBlind
		}
	}
	if all != changeNone {
		q.all.mark(o.At, all)
	}
	if conns != changeNone {
		q.conns.mark(o.At, conns)
	}
	q.counts, q.blind, q.lastErr, q.reloading = next, false, nil, false
	if o.At.After(q.lastOK) {
		q.lastOK = o.At
	}
	q.workers, q.reloads = slices.Clone(o.Workers), o.Reloads
	q.settle(o.At)
	for pid := range q.stops {
		if _, ok := next[pid]; !ok && q.gone[pid].PID == 0 {
			delete(q.stops, pid)
		}
	}
}

// unseen judges what a blind spell, ended by o, may have hidden from each
// clock: more reloads than new workers (fresh), or a worker that left
// during it and is not accounted for. Workers whose stop lines have not
// come are kept in gone, from o on.
func (q *quiet) unseen(o Observation, next map[int]counts, fresh int) (reqs, conns bool) {
	if o.Reloads-q.reloads > fresh {
		return true, true
	}
	for _, w := range q.workers {
		if _, ok := next[w.PID]; ok {
			continue
		}
		r, c, known := q.judgeGone(w)
		if !known {
			if q.gone == nil {
				q.gone = map[int]Worker{}
			}
			q.gone[w.PID], q.goneAt = w, o.At
			continue
		}
		reqs, conns = reqs || r, conns || c
	}
	return reqs, conns
}

// judgeGone says what a worker that left unseen may have hidden from each
// clock, once its stop lines are in (known): a frontend that accepted a
// connection since its last reading hides a change of both; sessions open
// then may have carried requests (Requests, and Connections when a
// frontend's requests count there).
func (q *quiet) judgeGone(w Worker) (reqs, conns, known bool) {
	if w.Opened == nil {
		return true, true, true // nothing to compare a stop line with
	}
	st := q.stops[w.PID]
	for fe, n := range w.Opened {
		final, ok := st[fe]
		if !ok {
			return false, false, false
		}
		if final != n {
			return true, true, true
		}
	}
	if w.Sessions > 0 {
		return true, len(q.ungraceful) > 0, true
	}
	return false, false, true
}

// stopped records a worker's stop line: frontend fe had accepted opened
// connections when the worker stopped accepting. Only the lines of workers
// seen are kept.
func (q *quiet) stopped(pid int, fe string, opened uint64, now time.Time) {
	if _, seen := q.counts[pid]; !seen && q.gone[pid].PID == 0 {
		return
	}
	if q.stops == nil {
		q.stops = map[int]map[string]uint64{}
	}
	if q.stops[pid] == nil {
		q.stops[pid] = map[string]uint64{}
	}
	// A backend of the same name stops too, its FE count 0: the larger
	// count is the frontend's.
	q.stops[pid][fe] = max(q.stops[pid][fe], opened)
	q.settle(now)
}

// settle judges the workers awaiting their stop lines: those whose lines
// are in, and all of them once stopLineWait has passed since the reading
// that found them gone, which then counts as a change.
func (q *quiet) settle(now time.Time) {
	if len(q.gone) == 0 {
		return
	}
	late := !now.Before(q.goneAt.Add(stopLineWait))
	for pid, w := range q.gone {
		r, c, known := q.judgeGone(w)
		if !known && !late {
			continue
		}
		if !known {
			r, c = true, true
		}
		if r {
			q.all.mark(q.goneAt, changeBlind)
		}
		if c {
			q.conns.mark(q.goneAt, changeBlind)
		}
		delete(q.gone, pid)
		delete(q.stops, pid)
	}
}

// counterChange folds one worker's counter into the change seen so far in a
// reading: a rise (or traffic on a worker first seen after the first
// reading) is a request; a fall is a reset unless a request was seen.
func counterChange(c change, known, seenBefore bool, prev, now uint64) change {
	switch {
	case known && now > prev, !known && seenBefore && now > 0:
		return changeRequest
	case known && now < prev && c == changeNone:
		return changeReset
	}
	return c
}

// clock returns the clock and period that decide quiet: the connections'
// once routing is withdrawn, every counted request's otherwise.
func (q *quiet) clock(withdrawn bool) (clock, time.Duration) {
	if withdrawn {
		return q.conns, q.withdrawnPeriod
	}
	return q.all, q.period
}

// end is the instant from which quiet can hold: the period after the last
// change of the clock that decides. Where routing is confirmed
// (explainedBy: its evidence plus the in-flight allowance, zero
// otherwise), a change shown by a reading taken by explainedBy is
// explained by the confirmation, the stop request and the first reading
// after a blind spell included: quiet can hold from explainedBy. A later
// change is unexplained and waits the period: the later of the two.
func (q *quiet) end(withdrawn bool, explainedBy time.Time) time.Time {
	c, period := q.clock(withdrawn)
	if withdrawn && !explainedBy.IsZero() && !c.last.After(explainedBy) {
		return explainedBy
	}
	return c.last.Add(period)
}

// met reports whether quiet holds at now: the last successful reading is the
// latest one and was taken at or after the end (the period after the last
// change; see end).
func (q *quiet) met(now time.Time, withdrawn bool, explainedBy time.Time) bool {
	if q.blind || len(q.gone) > 0 {
		return false
	}
	end := q.end(withdrawn, explainedBy)
	return !q.lastOK.Before(end) && !now.Before(end)
}

// since is the last change of the clock that decides quiet.
func (q *quiet) since(withdrawn bool) time.Time {
	c, _ := q.clock(withdrawn)
	return c.last
}

// readable reports whether HAProxy's counters are being read: the last poll
// succeeded and a successful one happened within the last period.
func (q *quiet) readable(now time.Time) bool {
	return !q.blind && !q.lastOK.Before(now.Add(-q.period))
}

// answering reports whether HAProxy answers at now, or is known to be
// reloading: its counters are readable, or the latest poll failed while
// it reloads. A drain that reaches its bound while HAProxy does not answer
// ends unavailable.
func (q *quiet) answering(now time.Time) bool {
	return q.readable(now) || q.blind && q.lastErr != nil && q.reloading
}

// detail says, for a person, why quiet does not hold at now.
func (q *quiet) detail(now time.Time, withdrawn bool, explainedBy time.Time) string {
	switch {
	case q.blind && q.lastErr != nil && q.reloading:
		return fmt.Sprintf("counters unreadable for %s while HAProxy reloads: %v", ago(now, q.lastErrAt), q.lastErr)
	case q.blind && q.lastErr != nil:
		return fmt.Sprintf("counters unreadable for %s: %v", ago(now, q.lastErrAt), q.lastErr)
	case q.blind:
		return "counters not read yet"
	case len(q.gone) > 0:
		return fmt.Sprintf("%d workers left while the counters were unreadable; waiting %s for their stop lines", len(q.gone), ago(q.goneAt.Add(stopLineWait), now))
	case now.Sub(q.lastOK) > q.period:
		return fmt.Sprintf("last reading %s ago", ago(now, q.lastOK))
	}
	c, period := q.clock(withdrawn)
	if end := q.end(withdrawn, explainedBy); withdrawn && end.Equal(explainedBy) {
		d := "new connections so far explained by kube-proxy's confirmation"
		if now.Before(end) {
			return d + fmt.Sprintf(" (its syncs + the in-flight allowance end in %s)", ago(end, now))
		}
		return d + fmt.Sprintf(", last reading %s ago", ago(now, q.lastOK))
	}
	var what string
	switch {
	case c.cause == changeRequest && !withdrawn:
		what = "last request %s ago"
	case c.cause == changeRequest && len(q.requestsOnly) == 0:
		what = "last new connection %s ago"
	case c.cause == changeRequest:
		what = "last new connection, or request on " + strings.Join(q.requestsOnly, ", ") +
			" (no option idle-close-on-response: its requests still count), %s ago"
	case c.cause == changeReset:
		what = "counter reset %s ago"
	case c.cause == changeBlind:
		what = "counters readable again %s ago"
	default:
		what = "%s since the stop request"
	}
	d := fmt.Sprintf(what, ago(now, c.last))
	if withdrawn && !explainedBy.IsZero() {
		d = "unexplained by kube-proxy's confirmation: " + d
	}
	if !now.Before(c.last.Add(period)) {
		d += fmt.Sprintf(", last reading %s ago", ago(now, q.lastOK))
	}
	return d
}

// ago formats now-t in seconds with one decimal, the precision a drain needs.
func ago(now, t time.Time) string {
	return fmt.Sprintf("%.1fs", now.Sub(t).Seconds())
}
