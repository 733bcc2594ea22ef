package drain

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Condition names.
const (
	ConditionQuiet   = "quiet"
	ConditionRouting = "routing"
)

// Status returns a copy of the state at now. Conditions are listed once a
// stop was requested, evaluated at now.
func (d *Drain) Status(now time.Time) Status {
	s := Status{
		Phase:      d.phase,
		StopAt:     d.stopAt,
		BoundAt:    d.boundAt,
		Deadline:   d.deadline,
		SoftStopAt: d.softStopAt,
		HardStopAt: d.hardStopAt,
		ExitedAt:   d.exitedAt,
		Reason:     d.reason,
		Detail:     d.detail,
		Workers:    slices.Clone(d.q.workers),
	}
	if d.stopAt.IsZero() {
		s.Deadline = d.early
		return s
	}
	wd := d.withdrawn()
	qc := Condition{Name: ConditionQuiet, Met: d.q.met(now, wd), Since: d.q.since(wd)}
	if !qc.Met {
		qc.Detail = d.q.detail(now, wd)
	}
	rc := Condition{Name: ConditionRouting, Met: routingMet(d.routing), Detail: routingDetail(d.routing), PendingNodes: d.routing.PendingNodes}
	s.Conditions = []Condition{qc, rc}
	return s
}

// Sessions is the sum of the current sessions of the workers last seen.
func (s Status) Sessions() int64 {
	var n int64
	for _, w := range s.Workers {
		n += w.Sessions
	}
	return n
}

// Summary is the status on one line, for logs and the status command, e.g.
// "draining: quiet: last request 0.5s ago; routing: withdrawn; 2 workers, 3 sessions"
// or "stopping: routed-away after 4.2s; 2 workers, 3 sessions".
func (s Status) Summary() string {
	var b strings.Builder
	b.WriteString(string(s.Phase))
	switch {
	case !s.SoftStopAt.IsZero():
		fmt.Fprintf(&b, ": %s after %.1fs", s.Reason, s.SoftStopAt.Sub(s.StopAt).Seconds())
		if s.Detail != "" {
			fmt.Fprintf(&b, " (%s)", s.Detail)
		}
	case s.Phase == Exited && s.Detail != "":
		fmt.Fprintf(&b, ": %s", s.Detail)
	case len(s.Conditions) > 0:
		b.WriteString(":")
		for i, c := range s.Conditions {
			if i > 0 {
				b.WriteString(";")
			}
			d := c.Detail
			if d == "" && c.Met {
				d = "met"
			}
			fmt.Fprintf(&b, " %s: %s", c.Name, d)
		}
	case s.Detail != "":
		fmt.Fprintf(&b, ": %s", s.Detail)
	}
	if !s.HardStopAt.IsZero() {
		b.WriteString("; hard stop sent")
	}
	if len(s.Workers) > 0 {
		fmt.Fprintf(&b, "; %d workers, %d sessions", len(s.Workers), s.Sessions())
	}
	return b.String()
}
