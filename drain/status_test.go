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

// Summary is one line per phase, for logs.
func TestSummary(t *testing.T) {
	r := serving(t, settings)
	r.poll(0, Worker{PID: 100, Sessions: 3})
	if got, want := r.d.Status(t0).Summary(), "serving; 1 workers, 3 sessions"; got != want {
		t.Errorf("serving: %q, want %q", got, want)
	}
	r.route(0, RoutingPending, "default/web")
	r.stop(0)
	r.poll(sec(1), Worker{PID: 100, Requests: 1, Sessions: 2})
	if got, want := r.d.Status(at(sec(1.5))).Summary(),
		"draining: quiet: last request 0.5s ago; routing: pending (default/web); 1 workers, 2 sessions"; got != want {
		t.Errorf("draining: %q, want %q", got, want)
	}
	r.route(sec(2), RoutingUnverified, "node-b: kube-proxy healthz refused")
	r.poll(sec(3), Worker{PID: 100, Requests: 1, Sessions: 1})
	r.d.Tick(at(sec(28)))
	if got, want := r.d.Status(at(sec(28))).Summary(),
		"stopping: unverified after 3.0s (node-b: kube-proxy healthz refused); hard stop sent; 1 workers, 1 sessions"; got != want {
		t.Errorf("stopping: %q, want %q", got, want)
	}
	r.d.MasterExited(at(sec(29)))
	if got, want := r.d.Status(at(sec(29))).Summary(),
		"exited: unverified after 3.0s (node-b: kube-proxy healthz refused); hard stop sent; 1 workers, 1 sessions"; got != want {
		t.Errorf("exited: %q, want %q", got, want)
	}
	other := serving(t, settings)
	other.d.MasterExited(at(sec(1)))
	if got, want := other.d.Status(at(sec(1))).Summary(), "exited: master exited while serving"; got != want {
		t.Errorf("exited while serving: %q, want %q", got, want)
	}
	if got, want := New(settings).Status(t0).Summary(), "starting"; got != want {
		t.Errorf("starting: %q, want %q", got, want)
	}
}
