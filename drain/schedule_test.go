package drain

import (
	"testing"
	"time"
)

// The bound and deadline derived from the settings, the stop request (at 0)
// and the pod's grace periods fed before or after it.
func TestSchedule(t *testing.T) {
	tests := []struct {
		name       string
		s          Settings
		before     []time.Duration // SetPodGracePeriod before the stop request
		after      []time.Duration // SetPodGracePeriod after it
		bound, ddl time.Duration
	}{
		{name: "settings only", s: settings, bound: sec(20), ddl: sec(28)},
		{name: "earlier deadline shifts bound", s: settings, after: []time.Duration{sec(20)}, bound: sec(10), ddl: sec(18)},
		{name: "later deadline ignored", s: settings, after: []time.Duration{sec(20), sec(27)}, bound: sec(10), ddl: sec(18)},
		{name: "grace learnt before stop", s: settings, before: []time.Duration{sec(26), sec(28)}, bound: sec(16), ddl: sec(24)},
		{name: "longer pod grace ignored", s: settings, before: []time.Duration{sec(42)}, bound: sec(20), ddl: sec(28)},
		{name: "bound never before stop", s: settings, after: []time.Duration{sec(7)}, bound: 0, ddl: sec(5)},
		{name: "zero pod grace: deadline past", s: settings, after: []time.Duration{0}, bound: 0, ddl: -sec(2)},
		{name: "bound never after deadline", s: Settings{QuietPeriod: sec(2), MaxWait: sec(40), GracePeriod: sec(30), Margin: sec(2)}, bound: sec(28), ddl: sec(28)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := New(tt.s)
			for _, x := range tt.before {
				d.SetPodGracePeriod(x)
			}
			d.StopRequested(t0)
			for _, x := range tt.after {
				d.SetPodGracePeriod(x)
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
