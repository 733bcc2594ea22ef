package supervisor

import (
	"log/slog"
	"strings"
	"testing"
)

// A master that exits 137 may have been SIGKILLed, or may have exited so
// itself because a worker was (HAProxy's master exits 128+N when a worker
// dies by signal N): its exit line says both, not "signal=SIGKILL" as if
// the master alone had been killed.
func TestMasterExitLineNamesTheWorkerToo(t *testing.T) {
	sc := newScenario(t, testSettings, nil)
	var b strings.Builder
	sc.l.log = slog.New(slog.NewTextHandler(&b, nil))
	sc.exit(sec(1), 137)
	line := b.String()
	if !strings.Contains(line, "haproxy exited") || !strings.Contains(line, "code=137") ||
		!strings.Contains(line, "SIGKILL") || !strings.Contains(line, "worker") || strings.Contains(line, "signal=SIGKILL") {
		t.Errorf("the exit line of a master that exited 137: %s", line)
	}
}
