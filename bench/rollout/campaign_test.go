package main

import (
	"strings"
	"testing"
)

// A withdrawn verdict is early provably only when it ended before a
// listing that still found the pod began; between that and the end of the
// first listing without it, the bench cannot tell.
func TestEndedEarlyTellsProofFromMeasurement(t *testing.T) {
	drain := func(reason string, ended, seen, gone float64) campaignDrain {
		return campaignDrain{rollout: 1, pod: podResult{name: "hs-1", reason: reason}, ended: sec(ended), rulesSeen: sec(seen), rulesGone: sec(gone)}
	}
	for _, tc := range []struct {
		name               string
		d                  campaignDrain
		provably, possibly bool
	}{
		{"after the drop", drain("routed-away", 1.5, 1.0, 1.2), false, false},
		{"before a listing that found the pod began", drain("routed-away", 0.9, 1.0, 1.2), true, true},
		{"within the measurement", drain("routed-away", 1.1, 1.0, 1.2), false, true},
		{"bound is no claim", drain("bound", 0.9, 1.0, 1.2), false, false},
		{"not recorded", drain("routed-away", 0.9, -1, 1.2), false, true},
		{"never dropped", drain("routed-away", 0.9, 1.0, -1), false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if p, q := tc.d.endedEarly(); p != tc.provably || q != tc.possibly {
				t.Errorf("endedEarly() = %v, %v; want %v, %v", p, q, tc.provably, tc.possibly)
			}
		})
	}
	ds := []campaignDrain{drain("routed-away", 0.9, 1.0, 1.2), drain("routed-away", 1.1, 1.0, 1.2), drain("routed-away", 2, 1.0, 1.2)}
	ds[1].pod.name = "hs-2"
	got := earlyParagraph(ds)
	for _, want := range []string{"Of the 3 withdrawn verdicts, 1 ended provably", "rollout 1 hs-1 (ended +0.90s, rules last found +1.00s, gone by +1.20s)", "and 1 while the drop was being measured", "hs-2"} {
		if !strings.Contains(got, want) {
			t.Errorf("paragraph lacks %q:\n%s", want, got)
		}
	}
	old := []campaignDrain{drain("routed-away", 0.9, -1, 1.2)}
	if got := earlyParagraph(old); !strings.Contains(got, "do not hold when the last listing") {
		t.Errorf("records without rulesSeen: %s", got)
	}
}
