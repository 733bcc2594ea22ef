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

// quiet tracks HAProxy's workers' counters per PID and keeps two clocks:
// every counted request and connection (Worker.Requests), and what still
// counts once routing is withdrawn (Worker.Connections: new connections,
// and the requests of frontends whose soft stop is not graceful).
//
// A clock moves to the At of an observation that shows a change of its
// counter. Not seeing is treated as a possible change of both: after a
// failed observation, or before the first successful one, the next
// successful observation moves both clocks. Quiet is therefore only ever
// proved by a reading: the counters read at least period after the last
// change are unchanged.
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
}

func newQuiet(s Settings) quiet {
	wp := s.WithdrawnQuietPeriod
	if wp <= 0 {
		wp = s.QuietPeriod
	}
	return quiet{period: s.QuietPeriod, withdrawnPeriod: wp, requestsOnly: slices.Clone(s.UngracefulFrontends), blind: true}
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
// worker that is gone is not. A failed poll makes the tracker blind until the
// next successful one.
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
	for _, w := range o.Workers {
		prev, known := q.counts[w.PID]
		all = counterChange(all, known, q.counts != nil, prev.requests, w.Requests)
		conns = counterChange(conns, known, q.counts != nil, prev.connections, w.Connections)
		next[w.PID] = counts{w.Requests, w.Connections}
	}
	if q.blind && all == changeNone {
		all = changeBlind
	}
	if q.blind && conns == changeNone {
		conns = changeBlind
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
	q.workers = slices.Clone(o.Workers)
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
	if q.blind {
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
