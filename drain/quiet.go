package drain

import (
	"fmt"
	"slices"
	"time"
)

// change says what last moved the quiet clock, for the detail of a result.
type change int

const (
	changeNone    change = iota // nothing yet
	changeStop                  // the stop request itself: quiet starts counting there
	changeRequest               // a worker's request counter rose (or a new worker had traffic)
	changeReset                 // a worker's counter went down: a reset, treated as traffic
	changeBlind                 // the first reading after a failed one (or the first ever)
)

// quiet tracks the request counters of HAProxy's workers per PID and the
// last instant something may have been served.
//
// The quiet clock (lastChange) moves to the At of an observation that shows
// a change. Not seeing is treated as a possible change: after a failed
// observation, or before the first successful one, the next successful
// observation moves the clock. Quiet is therefore only ever proved by a
// reading: the counters read at least period after the last change are
// unchanged.
type quiet struct {
	period time.Duration

	counts     map[int]uint64 // Requests per PID at the last successful observation
	blind      bool           // no successful observation since the last failure (or ever)
	lastChange time.Time      // last instant something may have been served
	cause      change         // what set lastChange
	lastOK     time.Time      // At of the last successful observation
	lastErr    error          // error of the last observation, nil when it succeeded
	lastErrAt  time.Time      // At of the first failure of the current blind spell
	workers    []Worker       // workers of the last successful observation
}

func newQuiet(period time.Duration) quiet {
	return quiet{period: period, blind: true}
}

// start moves the quiet clock to the stop request: what came before it does
// not matter, and a drain lasts at least one period.
func (q *quiet) start(at time.Time) {
	q.mark(at, changeStop)
}

// mark moves the quiet clock forward to at; it never moves back, so a reading
// taken before the stop request but delivered after it changes nothing.
func (q *quiet) mark(at time.Time, c change) {
	if at.Before(q.lastChange) {
		return
	}
	q.lastChange, q.cause = at, c
}

// observe applies one poll. A worker whose counter rose, a worker seen for
// the first time with traffic (a new worker from a reload starts at zero), or
// a counter that went down (a reset) is a change; a worker that is gone is
// not. A failed poll makes the tracker blind until the next successful one.
func (q *quiet) observe(o Observation) {
	if o.Err != nil {
		if !q.blind || q.lastErr == nil {
			q.lastErrAt = o.At
		}
		q.blind, q.lastErr = true, o.Err
		return
	}
	c := changeNone
	next := make(map[int]uint64, len(o.Workers))
	for _, w := range o.Workers {
		prev, known := q.counts[w.PID]
		switch {
		case known && w.Requests > prev, !known && q.counts != nil && w.Requests > 0:
			c = changeRequest
		case known && w.Requests < prev && c == changeNone:
			c = changeReset
		}
		next[w.PID] = w.Requests
	}
	if q.blind && c == changeNone {
		c = changeBlind
	}
	if c != changeNone {
		q.mark(o.At, c)
	}
	q.counts, q.blind, q.lastErr = next, false, nil
	if o.At.After(q.lastOK) {
		q.lastOK = o.At
	}
	q.workers = slices.Clone(o.Workers)
}

// met reports whether quiet holds at now: the last successful reading is the
// latest one and was taken at least period after the last change.
func (q *quiet) met(now time.Time) bool {
	if q.blind {
		return false
	}
	end := q.lastChange.Add(q.period)
	return !q.lastOK.Before(end) && !now.Before(end)
}

// readable reports whether HAProxy's counters are being read: the last poll
// succeeded and a successful one happened within the last period.
func (q *quiet) readable(now time.Time) bool {
	return !q.blind && !q.lastOK.Before(now.Add(-q.period))
}

// detail says, for a person, why quiet does not hold at now.
func (q *quiet) detail(now time.Time) string {
	switch {
	case q.blind && q.lastErr != nil:
		return fmt.Sprintf("counters unreadable for %s: %v", ago(now, q.lastErrAt), q.lastErr)
	case q.blind:
		return "counters not read yet"
	case now.Sub(q.lastOK) > q.period:
		return fmt.Sprintf("last reading %s ago", ago(now, q.lastOK))
	}
	var what string
	switch q.cause {
	case changeRequest:
		what = "last request %s ago"
	case changeReset:
		what = "counter reset %s ago"
	case changeBlind:
		what = "counters readable again %s ago"
	default:
		what = "%s since the stop request"
	}
	d := fmt.Sprintf(what, ago(now, q.lastChange))
	if !now.Before(q.lastChange.Add(q.period)) {
		d += fmt.Sprintf(", last reading %s ago", ago(now, q.lastOK))
	}
	return d
}

// ago formats now-t in seconds with one decimal, the precision a drain needs.
func ago(now, t time.Time) string {
	return fmt.Sprintf("%.1fs", now.Sub(t).Seconds())
}
