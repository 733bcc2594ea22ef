package status

import (
	"strings"
	"testing"
	"time"

	"github.com/hapsuper/hapsuper/drain"
)

// The text view ends with exactly one newline in every phase, so that a
// shell prompt after `hapsuper status` starts on a line of its own.
func TestRenderEndsWithNewline(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 10, 0, time.UTC)
	stop := now.Add(-3 * time.Second)
	tests := map[string]Snapshot{
		"starting, nothing known": {Phase: drain.Starting},
		"serving":                 {Phase: drain.Serving, MasterPID: 7, ObservedAt: now, Workers: []Worker{{PID: 8, Sessions: 3, Requests: 40}}},
		"draining": {Phase: drain.Draining, MasterPID: 7, PollError: "connection refused", Drain: Drain{
			StopRequested: stop, Bound: stop.Add(18 * time.Second), Deadline: stop.Add(28 * time.Second),
			Conditions: []Condition{{Name: "quiet", Since: stop}, {Name: "routing", Detail: "2 nodes pending", PendingNodes: 2}},
		}},
		"stopping, no workers left": {Phase: drain.Stopping, MasterPID: 7, Drain: Drain{
			StopRequested: stop, Bound: stop.Add(time.Second), Deadline: stop.Add(2 * time.Second), SoftStop: stop.Add(time.Second),
			Reason: drain.ReasonBound, Detail: "routing pending",
		}},
	}
	for name, s := range tests {
		var b strings.Builder
		if err := Render(&b, s, now); err != nil {
			t.Fatalf("%s: Render: %v", name, err)
		}
		out := b.String()
		if !strings.HasSuffix(out, "\n") || strings.HasSuffix(out, "\n\n") {
			t.Errorf("%s: the text view does not end with exactly one newline: %q", name, out)
		}
	}
}

// The text view reads as it means: routing off is "not observed", not a
// condition met; times to the millisecond; the per-worker counter is named
// for what it counts.
func TestRenderReadably(t *testing.T) {
	stop := time.Date(2026, 11, 30, 12, 0, 0, 123456789, time.UTC)
	s := Snapshot{Phase: drain.Draining, Settings: Settings{Routing: "off"}, Drain: Drain{
		StopRequested: stop, Bound: stop.Add(8 * time.Second), Deadline: stop.Add(13 * time.Second),
		Conditions: []Condition{{Name: "quiet", Since: stop}, {Name: "routing", Met: true, Detail: "off"}},
	}, Workers: []Worker{{PID: 8, Requests: 2, Connections: 1}}}
	var b strings.Builder
	if err := Render(&b, s, stop.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"off (not observed: the quiet period decides)", "drain started:", "2026-11-30T12:00:00.123Z (1s ago)", "CONNS+REQS"} {
		if !strings.Contains(out, want) {
			t.Errorf("the text view lacks %q:\n%s", want, out)
		}
	}
	for _, bad := range []string{"met (off)", ".123456789", "REQUESTS"} {
		if strings.Contains(out, bad) {
			t.Errorf("the text view shows %q:\n%s", bad, out)
		}
	}
}

// The companion's line says its state, pid, restarts and last exit.
func TestRenderCompanion(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 10, 0, time.UTC)
	code := 137
	var b strings.Builder
	s := Snapshot{Phase: drain.Serving, Companion: &Companion{State: "running", PID: 12, Restarts: 2, LastExit: &code, LastExitAt: now.Add(-5 * time.Second)}}
	if err := Render(&b, s, now); err != nil {
		t.Fatal(err)
	}
	if want := "companion:   running, pid 12, 2 restarts, last exit 137 5s ago\n"; !strings.Contains(b.String(), want) {
		t.Errorf("Render:\n%s\nwant the line %q", b.String(), want)
	}
}

// A failing companion's line says why, with its last output lines.
func TestRenderCompanionFailing(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 10, 0, time.UTC)
	code := 0
	s := Snapshot{Phase: drain.Serving, Companion: &Companion{State: "backoff", Restarts: 3, LastExit: &code, LastExitAt: now.Add(-time.Second),
		NextStart: now.Add(time.Second), Failing: "3 quick exits in a row, the last 0 after 20ms", Output: []string{"E0101 cannot reach the API", "exiting"}}}
	var b strings.Builder
	if err := Render(&b, s, now); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"companion FAILING:  3 quick exits in a row, the last 0 after 20ms\n", "companion output:   E0101 cannot reach the API\n", "companion output:   exiting\n"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("rendered:\n%s\nwant a line %q", b.String(), want)
		}
	}
}
