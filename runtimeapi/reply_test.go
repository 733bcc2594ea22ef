package runtimeapi

import (
	"errors"
	"strings"
	"testing"
)

func TestSplitOutputs(t *testing.T) {
	multi := fixture(t, "sample-multi.txt") // 4 outputs: info, stat of 4288 then of 4006
	outputs, err := splitOutputs(multi, 4)
	if err != nil || len(outputs) != 4 {
		t.Fatalf("split sample-multi: %d outputs, %v", len(outputs), err)
	}
	if !strings.HasPrefix(outputs[2], "Name: HAProxy\n") || !strings.HasPrefix(outputs[3], "# pxname,") {
		t.Fatalf("outputs out of order: %q, %q", firstLine(outputs[2]), firstLine(outputs[3]))
	}
	secondInfo := strings.Index(multi[1:], "Name: HAProxy") + 1

	for _, tc := range []struct {
		name      string
		reply     string
		n         int
		wantN     int  // outputs returned
		between   bool // closed cleanly between outputs
		wantErrIs error
	}{
		{"empty reply", "", 1, 0, true, ErrPartialReply},
		{"cut inside first output", multi[:500], 4, 0, false, ErrPartialReply},
		{"cut at the start of the 2nd worker (it is exiting)", multi[:secondInfo], 4, 2, true, ErrPartialReply},
		{"cut before the last empty line", strings.TrimSuffix(multi, "\n"), 4, 3, false, ErrPartialReply},
		{"unknown target ends the line", fixture(t, "sample-vanished.txt"), 5, 2, false, ErrNoSuchProcess},
		{"unreachable old worker ends the line", fixture(t, "sample-unreachable.txt"), 4, 2, false, ErrWorkerUnreachable},
		{"only the unknown target", fixture(t, "error-no-pid.txt"), 1, 0, false, ErrNoSuchProcess},
		{"more outputs than commands", multi, 3, 3, false, nil},
		{"garbage after unknown target", fixture(t, "error-no-pid.txt") + "junk\n", 1, 0, false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := splitOutputs(tc.reply, tc.n)
			if err == nil {
				t.Fatalf("split returned %d outputs and no error", len(got))
			}
			if tc.wantErrIs != nil && !errors.Is(err, tc.wantErrIs) {
				t.Fatalf("error %q does not wrap %v", err, tc.wantErrIs)
			}
			var closed *closedBetweenError
			if errors.As(err, &closed) != tc.between {
				t.Fatalf("error %q: closed between outputs = %v, want %v", err, !tc.between, tc.between)
			}
			if len(got) != tc.wantN {
				t.Fatalf("got %d complete outputs, want %d", len(got), tc.wantN)
			}
		})
	}
}

func TestNoTargetPID(t *testing.T) {
	_, err := splitOutputs(fixture(t, "sample-vanished.txt"), 5)
	if pid, ok := noTargetPID(err); !ok || pid != 99999 {
		t.Fatalf("noTargetPID(%q) = %d, %v; want 99999", err, pid, ok)
	}
}

func TestErrorAnswers(t *testing.T) {
	for _, name := range []string{"error-unknown-master.txt", "error-unknown-worker.txt"} {
		out, err := splitOutputs(fixture(t, name), 1)
		if err != nil {
			t.Fatalf("%s: split: %v", name, err)
		}
		if err := answerError(out[0]); !errors.Is(err, ErrCLI) || !strings.Contains(err.Error(), "Unknown command") {
			t.Fatalf("%s: answerError = %v; want ErrCLI with Unknown command", name, err)
		}
	}
}

// maxErrorLen bounds an error of this package whatever HAProxy sent: what
// it quotes of a reply is clipped (the errors reach the drain's detail and
// the status reply).
const maxErrorLen = 2048

// A 3 MB line from the master is not quoted whole into an error.
func TestErrorsQuoteRepliesClipped(t *testing.T) {
	huge := strings.Repeat("x", 3<<20)
	for name, err := range map[string]error{
		"show proc header": func() error { _, err := parseShowProc(huge + "\n"); return err }(),
		"show proc line":   func() error { _, err := parseShowProc("#<PID> <type>\n" + huge + " master 0 0d 2.6\n"); return err }(),
		"show info field":  func() error { _, err := parseShowInfo("Name: HAProxy\nPid: "+huge+"\n", 0); return err }(),
		"unknown section": func() error {
			_, err := parseShowProc("#<PID> <type>\n1 master 0 [failed: 0] 0d 2.6\n# " + huge + "\n")
			return err
		}(),
		"target pid answer": func() error {
			_, err := splitOutputs("Can't find the target PID matching the prefix '@!"+huge+"'\n", 1)
			return err
		}(),
	} {
		if err == nil {
			t.Errorf("%s: no error", name)
			continue
		}
		if n := len(err.Error()); n > maxErrorLen {
			t.Errorf("%s: error of %d bytes, want at most %d", name, n, maxErrorLen)
		}
	}
}
