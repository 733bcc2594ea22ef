package harness

import "time"

// Drain is what hapsuper's log says of its drain: the times of its
// lines, zero when a line is missing.
type Drain struct {
	Started     time.Time // "drain started"
	Soft        time.Time // "soft stop"
	Ended       time.Time // "drain ended"
	HAProxyExit time.Time // "haproxy exited"
	Withdrawn   time.Time // the first "routing" state=withdrawn at or after since
	HAProxyCode float64   // "haproxy exited" code; -1 when not logged
	Reason      string    // "drain ended" reason; "" when not logged
	Detail      string    // "drain ended" detail
}

// ReadDrain reads the drain from hapsuper's log; routing's withdrawal
// counts from since on.
func (h *Log) ReadDrain(since time.Time) Drain {
	d := Drain{HAProxyCode: -1}
	if l, ok := h.Find("drain started", nil); ok {
		d.Started = l.At
	}
	if l, ok := h.Find("soft stop", nil); ok {
		d.Soft = l.At
	}
	if l, ok := h.Find("drain ended", nil); ok {
		d.Ended, d.Reason, d.Detail = l.At, l.Str("reason"), l.Str("detail")
	}
	if l, ok := h.Find("haproxy exited", nil); ok {
		d.HAProxyExit = l.At
		if c, ok := l.Num("code"); ok {
			d.HAProxyCode = c
		}
	}
	if l, ok := h.Find("routing", func(l Entry) bool { return l.Str("state") == "withdrawn" && !l.At.Before(since) }); ok {
		d.Withdrawn = l.At
	}
	return d
}
