package main

import (
	"strings"
	"testing"
	"time"

	"github.com/hapsuper/hapsuper/test/harness"
)

var t0 = time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)

func at(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

func sec(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// drained is a pod deleted at t0 whose rules dropped it at node1 and
// node2 seconds after, soft-stopped at soft and exited 0.1 s later.
func drained(name string, node1, node2, soft float64) podResult {
	return podResult{name: name, deleted: t0, soft: at(soft), master: at(soft + 0.1),
		nodeRules: map[string]time.Time{"node1": at(node1), "node2": at(node2)}}
}

func ok(pod string, sent, done float64) harness.Outcome {
	return harness.Outcome{Pod: pod, Sent: at(sent), Done: at(done), Kind: harness.KindOK}
}

func TestFloorIsTheLastRulesDropOrTheLastInFlightRequest(t *testing.T) {
	pod := drained("old-1", 0.8, 1.6, 2.5)
	for _, tc := range []struct {
		name string
		out  []harness.Outcome
		want time.Time
	}{
		{"no request: the last node's rules", nil, at(1.6)},
		{"a request sent before the last drop, ended after", []harness.Outcome{ok("old-1", 0.5, 0.6), ok("old-1", 1.5, 2.1)}, at(2.1)},
		{"a request ended before the drop", []harness.Outcome{ok("old-1", 1.0, 1.2)}, at(1.6)},
		{"sent after the drop (a kept-alive connection) does not count", []harness.Outcome{ok("old-1", 1.7, 3.0)}, at(1.6)},
		{"another pod's request does not count", []harness.Outcome{ok("new-1", 1.5, 2.9)}, at(1.6)},
		{"a failed request does not count", []harness.Outcome{{Sent: at(1.5), Done: at(2.9), Kind: harness.KindReset}}, at(1.6)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, found := floorOf(pod, tc.out)
			if !found {
				t.Fatal("no floor")
			}
			if !f.at().Equal(tc.want) {
				t.Errorf("floor at %v after the delete, want %v", f.at().Sub(t0), tc.want.Sub(t0))
			}
		})
	}
}

func TestNoFloorWhileANodeStillRoutes(t *testing.T) {
	pod := drained("old-1", 0.8, 1.6, 2.5)
	pod.nodeRules["node2"] = time.Time{}
	if f, found := floorOf(pod, nil); found {
		t.Errorf("floor %v with node2's rules never seen without the pod", f.at().Sub(t0))
	}
	if _, found := excess(pod, nil); found {
		t.Error("an excess without a floor")
	}
	pod = drained("old-1", 0.8, 1.6, 2.5)
	pod.soft = time.Time{}
	if _, found := excess(pod, nil); found {
		t.Error("an excess without a soft stop")
	}
}

func TestExcessIsTheSoftStopMinusTheFloor(t *testing.T) {
	late := drained("old-1", 0.8, 1.6, 2.3)
	if e, _ := excess(late, []harness.Outcome{ok("old-1", 1.5, 1.9)}); e != sec(0.4) {
		t.Errorf("excess %v, want 400ms (soft stop 2.3 s, floor the request's end 1.9 s)", e)
	}
	early := drained("old-1", 0.8, 4.6, 1.0)
	if e, _ := excess(early, nil); e != sec(-3.6) {
		t.Errorf("excess %v, want -3.6s (soft stop 1.0 s, node2 dropped the pod at 4.6 s)", e)
	}
}

// cellOf is a cell of strategy s whose drains (first, second) soft-stopped
// ex1 and ex2 seconds after their last node dropped them.
func cellOf(s strategy, frozen bool, ex1, ex2 float64) cellResult {
	return cellResult{cell: cell{strat: s, pat: patNewConns, frozen: frozen}, pods: []podResult{
		drained("a", 0.5, 1.0, 1.0+ex1), drained("b", 0.7, 2.0, 2.0+ex2),
	}}
}

func TestSummaryKeepsLiveAndFrozenApart(t *testing.T) {
	cells := []cellResult{
		cellOf(hapsuperS(), false, 0.2, 0.4),
		cellOf(hapsuperS(), false, 0.6, 0.3),
		cellOf(hapsuperS(), true, 1.5, 0.9),
	}
	live, frozen := summarizeExcess(cells, false), summarizeExcess(cells, true)
	if live.drains != 4 || live.median != sec(0.35) || live.max != sec(0.6) {
		t.Errorf("live: %d drains, median %v, max %v; want 4, 350ms, 600ms", live.drains, live.median, live.max)
	}
	if frozen.drains != 2 || frozen.median != sec(1.2) || frozen.max != sec(1.5) {
		t.Errorf("frozen: %d drains, median %v, max %v; want 2, 1.2s, 1.5s", frozen.drains, frozen.median, frozen.max)
	}
	table := floorTable(cells)
	for _, want := range []string{
		"| hapsuper | new-conns | live | 1.00 | 2.00 | +0.20 / +0.40 | +0.30 / +0.40 |",
		"| hapsuper | +0.35 / +0.60 (4 drains) | +1.20 / +1.50 (2 drains) |",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("floor table lacks %q:\n%s", want, table)
		}
	}
}

func TestExcessTargetsAreJudgedWithTheMetricsWitness(t *testing.T) {
	within := []cellResult{cellOf(hapsuperS(), false, 0.1, 0.3), cellOf(hapsuperS(), true, 0.4, 0.5)}
	for _, tg := range excessTargets(within, "hapsuper", hapsuperS().quietOnceWithdrawn(), true) {
		if tg.verdict != "met" {
			t.Errorf("%s: %s, want met (%s)", tg.name, tg.verdict, tg.measured)
		}
	}
	// Live: the median over 0.3 s. Frozen: the median within 0.5 s, the max
	// over minSyncPeriod + allowance + poll.
	over := []cellResult{cellOf(hapsuperS(), false, 0.5, 0.6), cellOf(hapsuperS(), true, -1.2, excessMaxTarget.Seconds()+0.1)}
	got := excessTargets(over, "hapsuper", hapsuperS().quietOnceWithdrawn(), true)
	if len(got) != 2 {
		t.Fatalf("%d targets, want 2 (live, frozen)", len(got))
	}
	for _, tg := range got {
		if !strings.HasPrefix(tg.verdict, "**missed**") {
			t.Errorf("%s: %s, want missed (%s)", tg.name, tg.verdict, tg.measured)
		}
	}
	// Live, the median within 0.3 s but one drain past 1 s: missed, though
	// within the frozen cells' max.
	liveMax := []cellResult{cellOf(hapsuperS(), false, 0.1, excessLiveMaxTarget.Seconds()+0.05)}
	liveMax[0].pods = append(liveMax[0].pods, drained("c", 0.9, 3.0, 3.2))
	if tg := excessTargets(liveMax, "hapsuper", hapsuperS().quietOnceWithdrawn(), true); len(tg) != 1 || !strings.HasPrefix(tg[0].verdict, "**missed**") || !strings.Contains(tg[0].name, "max ≤ 1.00 s") {
		t.Errorf("live max over 1 s: %+v, want one live target missed, its max 1.00 s", tg)
	}
	for _, tg := range excessTargets(over, "hapsuper", hapsuperS().quietOnceWithdrawn(), false) {
		if !strings.HasPrefix(tg.verdict, "measured") {
			t.Errorf("without metrics %s: %s, want measured", tg.name, tg.verdict)
		}
	}
	wq := hapsuperWQ(2 * time.Second)
	for _, tg := range excessTargets(over, wq.name, wq.quietOnceWithdrawn(), true) {
		if !strings.HasPrefix(tg.verdict, "measured") {
			t.Errorf("withdrawn quiet 2s %s: %s, want measured", tg.name, tg.verdict)
		}
	}
}

func TestOracleDrainSoftStopsAtTheFloor(t *testing.T) {
	c := cellOf(hapsuperS(), true, 0.7, 0.2)
	got := oracleDrains([]cellResult{c})
	// Floors at 1.0 and 2.0 s after the deletes, 0.1 s from soft stop to exit.
	if len(got) != 2 || got[0] != sec(1.1) || got[1] != sec(2.1) {
		t.Errorf("oracle drains %v, want [1.1s 2.1s]", got)
	}
}
