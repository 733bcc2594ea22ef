package main

import (
	"os"
	"path/filepath"
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

// The headline counts every drain; the second share leaves out the drains
// whose pod nothing shows the API withdrew, and only those: a verdict that
// still found the pod ready in the API while a node's rules had dropped it
// missed a withdrawal, and stays in.
func TestRoutedAwayShareLeavesOutDrainsTheAPIKept(t *testing.T) {
	const pending = "routing: pending (routed here in the API: default/web (IPv4): port h2/TCP: endpoint ready); quiet: last request 0.1s ago"
	drain := func(rollout int, name, reason, detail string, firstGone, lastGone float64) campaignDrain {
		return campaignDrain{rollout: rollout, pod: podResult{name: name, reason: reason, detail: detail},
			ended: sec(12), rulesFirstGone: sec(firstGone), rulesGone: sec(lastGone), rulesSeen: -1, probe: -1}
	}
	ds := []campaignDrain{
		drain(1, "hs-1", "routed-away", "routing: withdrawn", 0.6, 0.7),
		drain(1, "hs-2", "routed-away", "routing: withdrawn", 0.6, 0.7),
		drain(2, "hs-3", "routed-away", "routing: withdrawn", 0.6, 0.7),
		drain(2, "hs-4", "bound", pending, -1, -1),     // kept by the API: left out
		drain(3, "hs-5", "bound", pending, 0.7, 0.8),   // the rules dropped it: stays
		drain(3, "hs-6", "bound", pending, 0.7, -1),    // one node dropped it: stays
		drain(4, "hs-7", "bound", pending, 12.1, 12.2), // dropped after the end: left out
		drain(4, "hs-8", "bound", "routing: pending (withdrawn in the API 105ms ago: default/web (IPv4); kube-proxy not confirmed)", -1, -1),
	}
	old := drain(5, "hs-9", "bound", pending, -1, 0.9) // a record without the first drop
	old.rulesFirstGone = -1
	ds = append(ds, old)

	got := routedAwayParagraph(ds)
	for _, want := range []string{
		"Routed-away: 3 of 9 drains (33.3 %)",
		"of the 7 drains whose pod the API withdrew, 3 (42.9 %)",
		"Left out of the second (2): the drains that ended",
		": rollout 2 hs-4, rollout 4 hs-7.",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("paragraph lacks %q:\n%s", want, got)
		}
	}
	body := campaignBody(ds)
	if !strings.Contains(body, "| 9 | 5 |") || !strings.Contains(body, "bound ×6, routed-away ×3") {
		t.Errorf("the headline table changed:\n%s", body)
	}
	if !strings.Contains(body, got) {
		t.Errorf("the body lacks the paragraph:\n%s", body)
	}
	if got := routedAwayParagraph(nil); !strings.Contains(got, "0 of 0 drains (-)") {
		t.Errorf("no drains: %s", got)
	}
}

// The setup states the probe only for records that hold it, and the
// paragraph counts each rollout's wait once.
func TestProbeParagraphCountsRollouts(t *testing.T) {
	d := func(rollout int, probe float64, timedOut bool) campaignDrain {
		return campaignDrain{rollout: rollout, probe: sec(probe), probeTimedOut: timedOut, rulesGone: -1, rulesSeen: -1, rulesFirstGone: -1}
	}
	ds := []campaignDrain{d(1, 0.2, false), d(1, 0.2, false), d(2, 13.4, false), d(2, 13.4, false), d(3, 90.1, true), d(3, 90.1, true), d(4, 0.3, false)}
	got := probeParagraph(ds)
	want := "within 1 s before 2 of 4 rollouts; the longest wait was 90.1 s (rollout 3), and 1 of the 4 went on without an answer after 90 s."
	if !strings.Contains(got, want) {
		t.Errorf("probeParagraph = %q; want it to contain %q", got, want)
	}
	if s := probeSetup(ds); !strings.HasPrefix(s, "Before each rollout's first delete") {
		t.Errorf("probeSetup = %q", s)
	}
	mixed := append([]campaignDrain{d(0, -1, false)}, ds...)
	if s := probeSetup(mixed); !strings.HasPrefix(s, "In the parts that record it (4 of 5 rollouts)") {
		t.Errorf("probeSetup of mixed records = %q", s)
	}
	older := []campaignDrain{d(1, -1, false)}
	if probeSetup(older) != "" || probeParagraph(older) != "" {
		t.Errorf("records without the probe: %q, %q", probeSetup(older), probeParagraph(older))
	}
}

// What a run records reads back, and a record written before the probe
// and the first drop were kept reads as "not recorded".
func TestDrainRecordsKeepProbeAndFirstDrop(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "c.jsonl")
	in := campaignDrain{rollout: 1, seed: 7, pat: patPause, pod: podResult{name: "hs-1", reason: "bound"}, ended: sec(12),
		rulesGone: -1, rulesSeen: -1, rulesFirstGone: sec(0.7), probe: sec(90.1), probeTimedOut: true}
	if err := writeDrains(path, "-campaign 2", []campaignDrain{in}); err != nil {
		t.Fatal(err)
	}
	oldPath := filepath.Join(dir, "old.jsonl")
	if err := os.WriteFile(oldPath, []byte(`{"part":"-campaign 2","rollout":1,"seed":7,"pattern":"pause","faults":null,"pod":"hs-2","reason":"bound","detail":"","late":-1,"failed":0,"audited":0,"ended":12000000000}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ds, _, err := readDrains([]string{path, oldPath})
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 2 {
		t.Fatalf("read %d drains, want 2", len(ds))
	}
	if got := ds[0]; got.probe != in.probe || !got.probeTimedOut || got.rulesFirstGone != in.rulesFirstGone {
		t.Errorf("read back probe %v timed out %v first drop %v; want %v true %v", got.probe, got.probeTimedOut, got.rulesFirstGone, in.probe, in.rulesFirstGone)
	}
	if got := ds[1]; got.probe != -1 || got.probeTimedOut || got.rulesFirstGone != -1 {
		t.Errorf("older record: probe %v timed out %v first drop %v; want -1 false -1", got.probe, got.probeTimedOut, got.rulesFirstGone)
	}
}
