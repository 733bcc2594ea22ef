package haproxy

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// A command that leaves a child holding its output, or that never ends,
// returns within its timeout (plus the second given to the pipes), with
// its group killed; an ordinary one returns its output and exit.
func TestRunHAProxyBounded(t *testing.T) {
	out, err := RunHAProxy(t.Context(), 5*time.Second, "/bin/sh", "-c", "echo hello; echo oops >&2; exit 3")
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 3 || !strings.Contains(string(out), "hello") || !strings.Contains(string(out), "oops") {
		t.Errorf("RunHAProxy = %q, %v; want both lines and exit 3", out, err)
	}
	for _, script := range []string{"sleep 60 & echo started", "sleep 60"} {
		start := time.Now()
		_, err := RunHAProxy(t.Context(), 300*time.Millisecond, "/bin/sh", "-c", script)
		took := time.Since(start)
		if script == "sleep 60" && !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%q: %v, want context.DeadlineExceeded", script, err)
		}
		if took > 3*time.Second {
			t.Errorf("%q took %s, want about 0.3 s (+1 s for the pipes at most)", script, took)
		}
	}
}
