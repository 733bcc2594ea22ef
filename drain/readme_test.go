package drain

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// The README's reasons table lists what Reasons lists, in any order, and the
// phase row of the JSON table in docs/status.md what Phases lists, in the
// order of a life.
func TestREADMEListsPhasesAndReasons(t *testing.T) {
	lines := readLines(t, "../README.md")

	var reasons []string
	in := false
	for _, l := range lines {
		switch {
		case l == "| reason | meaning |":
			in = true
		case in && strings.HasPrefix(l, "| `"):
			reasons = append(reasons, strings.Trim(strings.Split(l, "|")[1], " `"))
		case in && l != "|---|---|":
			in = false
		}
	}
	var want []string
	for _, r := range Reasons() {
		want = append(want, string(r))
	}
	slices.Sort(reasons)
	slices.Sort(want)
	if !slices.Equal(reasons, want) {
		t.Errorf("README's reasons table lists %v; drain.Reasons are %v", reasons, want)
	}

	var phases []string
	for _, l := range readLines(t, "../docs/status.md") {
		if row, ok := strings.CutPrefix(l, "| `phase` | "); ok {
			for p := range strings.SplitSeq(strings.TrimSuffix(row, " |"), ", ") {
				phases = append(phases, strings.Trim(p, "`"))
			}
		}
	}
	var wantPhases []string
	for _, p := range Phases() {
		wantPhases = append(wantPhases, string(p))
	}
	if !slices.Equal(phases, wantPhases) {
		t.Errorf("docs/status.md's phase row lists %v; drain.Phases are %v", phases, wantPhases)
	}
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(string(b), "\n")
}
