package drain

import (
	"testing"
)

// Status keeps the workers of the last successful reading (a failed one does
// not erase them) and hands out a copy.
func TestStatusWorkers(t *testing.T) {
	r := serving(t, settings)
	r.d.Observe(Observation{At: t0, Workers: []Worker{{PID: 100, Requests: 3, Sessions: 4}, {PID: 90, Old: true, Sessions: 1}}})
	r.fail(sec(1))
	st := r.d.Status(at(sec(1)))
	if len(st.Workers) != 2 || st.Sessions() != 5 {
		t.Fatalf("workers %+v, want the two of the first reading", st.Workers)
	}
	st.Workers[0].Sessions = 99
	if again := r.d.Status(at(sec(1))); again.Workers[0].Sessions != 4 {
		t.Fatal("Status shares its workers slice with the Drain")
	}
}
