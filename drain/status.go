package drain

import (
	"slices"
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

		LateConnections: d.a.late,
	}
	if d.stopAt.IsZero() {
		return s
	}
	wd := d.withdrawn()
	by := d.explainedBy()
	qc := Condition{Name: ConditionQuiet, Met: d.q.met(now, wd, by), Since: d.q.since(wd)}
	if !qc.Met {
		qc.Detail = d.q.detail(now, wd, by)
	}
	r := d.routing
	rc := Condition{Name: ConditionRouting, Met: routingMet(r), Routing: &r, PendingNodes: r.PendingNodes}
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
