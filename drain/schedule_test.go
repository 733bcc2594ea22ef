package drain

import (
	"testing"
	"time"
)

// The bound and deadline derived from the settings, the stop request (at 0)
// and SetDeadline calls before or after it.
func TestSchedule(t *testing.T) {
	tests := []struct {
		name       string
		s          Settings
		before     []time.Duration // SetDeadline before the stop request
		after      []time.Duration // SetDeadline after it
		bound, ddl time.Duration
	}{
		{name: "settings only", s: settings, bound: sec(20), ddl: sec(28)},
		{name: "earlier deadline shifts bound", s: settings, after: []time.Duration{sec(18)}, bound: sec(10), ddl: sec(18)},
		{name: "later deadline ignored", s: settings, after: []time.Duration{sec(18), sec(25)}, bound: sec(10), ddl: sec(18)},
		{name: "deadline learnt before stop", s: settings, before: []time.Duration{sec(24), sec(26)}, bound: sec(16), ddl: sec(24)},
		{name: "deadline before stop wins if earlier", s: settings, before: []time.Duration{sec(40)}, bound: sec(20), ddl: sec(28)},
		{name: "bound never before stop", s: settings, after: []time.Duration{sec(5)}, bound: 0, ddl: sec(5)},
		{name: "bound never after deadline", s: Settings{QuietPeriod: sec(2), MaxWait: sec(40), GracePeriod: sec(30), Margin: sec(2)}, bound: sec(28), ddl: sec(28)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := New(tt.s)
			for _, x := range tt.before {
				d.SetDeadline(at(x))
			}
			d.StopRequested(t0)
			for _, x := range tt.after {
				d.SetDeadline(at(x))
			}
			st := d.Status(t0)
			if got := st.BoundAt.Sub(t0); got != tt.bound {
				t.Errorf("bound %v, want %v", got, tt.bound)
			}
			if got := st.Deadline.Sub(t0); got != tt.ddl {
				t.Errorf("deadline %v, want %v", got, tt.ddl)
			}
		})
	}
}
