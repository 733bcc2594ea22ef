package main

import (
	"strings"
	"testing"
	"time"

	"github.com/hapsuper/hapsuper/test/harness"
)

func TestSpread(t *testing.T) {
	s := func(xs ...float64) []time.Duration {
		var out []time.Duration
		for _, x := range xs {
			out = append(out, time.Duration(x*float64(time.Second)))
		}
		return out
	}
	var hundred []float64
	for i := 100; i >= 1; i-- {
		hundred = append(hundred, float64(i))
	}
	for _, tc := range []struct {
		name string
		in   []time.Duration
		want string
	}{
		{"empty", nil, "-"},
		{"one", s(2.5), "2.50 / 2.50 / 2.50 / 2.50 / 2.50"},
		{"unsorted", s(3, 1, 2), "1.00 / 2.00 / 3.00 / 3.00 / 3.00"},
		{"1..100 reversed", s(hundred...), "1.00 / 50.00 / 90.00 / 99.00 / 100.00"},
	} {
		if got := spread(tc.in); got != tc.want {
			t.Errorf("%s: spread = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestSoakReport(t *testing.T) {
	now := time.Now()
	pod := func(name string, drain time.Duration, reason string, late, code int) podResult {
		return podResult{name: name, deleted: now, master: now.Add(drain), reason: reason, late: late, code: code, usage: usage{rssKB: 30 * 1024}}
	}
	row := soakRow{cell: cell{strat: hapsuperS(), pat: patNewConns}, rollouts: 2, took: 20 * time.Second, cells: []cellResult{
		{outcomes: []harness.Outcome{{Kind: harness.KindOK}, {Kind: harness.KindRefused}},
			pods: []podResult{pod("a", 3*time.Second, "routed-away", 0, 0), pod("b", 4*time.Second, "routed-away", 2, 0)}},
		{outcomes: []harness.Outcome{{Kind: harness.KindOK}},
			pods: []podResult{pod("c", 2*time.Second, "bound", 0, 1), pod("d", 5*time.Second, "routed-away", 0, 0)}},
	}}
	got := soakReport([]soakRow{row}, 4, "-soak 4 -kube-proxy live", 20*time.Second, time.Minute, false)
	want := "| hapsuper | new-conns | live | 4 | 3 | 1 (refused 1) | 2.00 / 3.00 / 5.00 / 5.00 / 5.00 | bound ×1, routed-away ×3 | 2 (1) | 1 | 30.0 | 20s |"
	if !strings.Contains(got, want) {
		t.Errorf("soak report lacks the row\n%s\ngot:\n%s", want, got)
	}
}
