package integration

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestLogFlood_CompanionCannotCrowdOutHapsuper: a companion that writes
// as fast as it can (`yes`) shares hapsuper's stderr; hapsuper's own
// records still all get through (HAProxy ready, the drain's start and
// end), the companion's lines are the ones dropped, and the drop counts
// say so by source. With one shared queue, `drain started` was lost in 2
// runs of 3.
func TestLogFlood_CompanionCannotCrowdOutHapsuper(t *testing.T) {
	yes, err := exec.LookPath("yes")
	if err != nil {
		t.Fatalf("no yes(1): %v", err)
	}
	eachHAProxy(t, func(t *testing.T, h haproxyVersion) {
		dir := t.TempDir()
		cfg := newConfig(t)
		s := startCommand(t, dir, procOptions{}, append(fast.flags(),
			"--companion", yes,
			"--haproxy-command", h.command(t, dir)+" -f "+cfg.write(t, dir),
			"--master-socket", filepath.Join(dir, "master.sock"),
			"--status-socket", filepath.Join(dir, "status.sock"),
			"--override-file", filepath.Join(dir, "override.cfg"),
			"--log-format", "json"))
		s.waitReady(cfg.webAddr())
		time.Sleep(2 * time.Second) // the flood runs
		term := s.signal(syscall.SIGTERM)
		code, exitAt := s.waitExit(30 * time.Second)
		t.Logf("exit %d %s after SIGTERM", code, exitAt.Sub(term))
		var reports, own, comp int
		for _, l := range s.Lines() {
			var total, o, c int
			if _, err := fmt.Sscanf(l.Raw, "hapsuper: %d log lines dropped: stderr was not read fast enough (hapsuper's: %d, the companion's: %d)", &total, &o, &c); err == nil {
				reports++
				own += o
				comp += c
			}
		}
		t.Logf("flood: %d lines read, %d drop reports: the companion's %d dropped, hapsuper's %d", len(s.Lines()), reports, comp, own)
		for _, msg := range []string{"haproxy ready", "drain started", "drain ended"} {
			if n := len(s.All(msg)); n != 1 {
				t.Errorf("%q logged %d times, want once", msg, n)
			}
		}
		if own != 0 {
			t.Errorf("%d of hapsuper's own lines dropped for the companion's flood", own)
		}
		if code != 0 {
			t.Errorf("exit %d, want 0", code)
		}
	})
}
