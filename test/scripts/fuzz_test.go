package scripts

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// fakeGo writes a `go` that answers hack/fuzz.sh's runs in turn from
// replies (output, then exit code), counting its calls in dir/calls.
func fakeGo(t *testing.T, replies ...string) (bin, calls string) {
	t.Helper()
	dir := t.TempDir()
	calls = filepath.Join(dir, "calls")
	var script strings.Builder
	script.WriteString("#!/usr/bin/env bash\nn=$(( $(cat " + calls + " 2>/dev/null || echo 0) + 1 ))\necho $n > " + calls + "\ncase $n in\n")
	for i, r := range replies {
		out, code, _ := strings.Cut(r, "\x00")
		script.WriteString("  " + string(rune('1'+i)) + ") cat <<'OUT'\n" + out + "\nOUT\n     exit " + code + ";;\n")
	}
	script.WriteString("esac\necho 'fake go: called too often' >&2\nexit 3\n")
	if err := os.WriteFile(filepath.Join(dir, "go"), []byte(script.String()), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir, calls
}

const (
	fuzzPass = "fuzz: elapsed: 3s, execs: 100 (33/sec), new interesting: 0 (total: 5)\nPASS\nok  \tx\t3.1s\x000"
	// The ending of go test that golang/go#75804 causes, as CI printed it.
	fuzzRace = "fuzz: elapsed: 3s, execs: 31892 (0/sec), new interesting: 4 (total: 75)\n--- FAIL: FuzzSample (3.08s)\n    context deadline exceeded\nFAIL\nexit status 1\x001"
	fuzzFind = "fuzz: elapsed: 1s, execs: 50 (50/sec)\n--- FAIL: FuzzSample (1.02s)\n    --- FAIL: FuzzSample (0.00s)\n        sample_test.go:10: context deadline exceeded\n\n    Failing input written to testdata/fuzz/FuzzSample/abc123\n    To re-run:\n    go test -run=FuzzSample/abc123\nFAIL\x001"
)

// failLine is what .ci/run counts as a failed test.
var failLine = regexp.MustCompile(`(?m)^\s*--- FAIL`)

// TestFuzzScript_DeadlineRace runs hack/fuzz.sh on a stand-in go: the
// coordinator's deadline race is run once more, and only once; a finding is
// never run again and always fails.
func TestFuzzScript_DeadlineRace(t *testing.T) {
	for _, tc := range []struct {
		name      string
		replies   []string
		wantCode  int
		wantCalls string
		wantRow   string
	}{
		{"race then pass", []string{fuzzRace, fuzzPass}, 0, "2", "PASS (run twice: golang/go#75804"},
		{"race twice", []string{fuzzRace, fuzzRace}, 1, "2", "FAIL"},
		{"a finding", []string{fuzzFind}, 1, "1", "FAIL: go test -run 'FuzzSample/abc123' ./runtimeapi"},
		{"pass", []string{fuzzPass}, 0, "1", "PASS"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bin, calls := fakeGo(t, tc.replies...)
			cmd := exec.Command("bash", filepath.Join(repoRoot(t), "hack", "fuzz.sh"), "FuzzSample")
			cmd.Dir = repoRoot(t)
			cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "FUZZTIME=3s", "TMPDIR="+t.TempDir())
			out, err := cmd.CombinedOutput()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tc.wantCode {
				t.Errorf("exit code %d, want %d; output:\n%s", code, tc.wantCode, out)
			}
			n, _ := os.ReadFile(calls)
			if got := strings.TrimSpace(string(n)); got != tc.wantCalls {
				t.Errorf("go test run %s times, want %s; output:\n%s", got, tc.wantCalls, out)
			}
			var row string
			for _, line := range strings.Split(string(out), "\n") {
				if strings.HasPrefix(line, "FuzzSample ") {
					row = line
				}
			}
			if !strings.Contains(row, tc.wantRow) {
				t.Errorf("table row %q does not say %q; output:\n%s", row, tc.wantRow, out)
			}
			// CI's summary counts these lines as failed tests: one for a
			// target that failed, none for a race run again that passed.
			if got := len(failLine.FindAllString(string(out), -1)); got != tc.wantCode {
				t.Errorf("%d lines a summary counts as failed tests, want %d; output:\n%s", got, tc.wantCode, out)
			}
		})
	}
}
