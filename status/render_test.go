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
