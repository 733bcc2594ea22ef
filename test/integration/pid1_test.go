package integration

import (
	"fmt"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// orphans is how many orphan processes the wrapper leaves behind, each
// sleeping orphanSleep: long enough that the first are still alive when the
// last are made on a loaded machine (making 200 took 7 s once at load 13,
// when each slept 2 s and only 46 were seen at once).
const (
	orphans     = 200
	orphanSleep = 8
)

// orphanScript leaves orphans: each subshell backgrounds a `sleep
// orphanSleep` and exits, so the sleep loses its parent.
var orphanScript = fmt.Sprintf("i=0; while [ $i -lt %d ]; do (sleep %d &); i=$((i+1)); done", orphans, orphanSleep)

// watchOrphans samples the children of pid until none is a live sleep any
// more (at most timeout) and returns the most sleeps seen at once.
func watchOrphans(pid int, timeout time.Duration) (most int) {
	end := time.Now().Add(timeout)
	for time.Now().Before(end) {
		n := 0
		for _, p := range childrenOf(pid) {
			if p.comm == "sleep" && p.state != 'Z' {
				n++
			}
		}
		most = max(most, n)
		if n == 0 && most > 0 {
			return most
		}
		time.Sleep(50 * time.Millisecond)
	}
	return most
}

// checkReaped waits, at most 2 s, until pid has no zombie child.
func checkReaped(t *testing.T, pid int) {
	t.Helper()
	var z []procInfo
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if z = zombiesOf(pid); len(z) == 0 {
			return
		}
	}
	t.Errorf("%d zombie children of hapsuper (pid %d) 2 s after the orphans exited: %v", len(z), pid, z[:min(len(z), 5)])
}

// TestPID1_ReapsOrphansInPIDNamespace: as PID 1 of a PID namespace (as in
// a container) hapsuper inherits every orphan and reaps them all, then
// stops cleanly.
func TestPID1_ReapsOrphansInPIDNamespace(t *testing.T) {
	eachHAProxy(t, func(t *testing.T, h haproxyVersion) {
		if _, err := exec.LookPath("unshare"); err != nil {
			t.Skip("unshare (util-linux) not installed")
		}
		checkReapsOrphans(t, h, "unshare", "--pid", "--fork", "--mount-proc")
	})
}

// TestPID1_SubreaperReapsOrphansOutsideNamespace: not PID 1, hapsuper is
// still its children's subreaper, so HAProxy's orphans come to it and are
// reaped.
func TestPID1_SubreaperReapsOrphansOutsideNamespace(t *testing.T) {
	eachHAProxy(t, func(t *testing.T, h haproxyVersion) { checkReapsOrphans(t, h) })
}

// checkReapsOrphans runs hapsuper over the orphan wrapper (through prefix,
// whose child it then is, when given), asserts that enough orphans were its
// children at once and that it reaped them all, and stops it with a
// SIGTERM to hapsuper itself: it must exit 0 and leave nothing.
func checkReapsOrphans(t *testing.T, h haproxyVersion, prefix ...string) {
	cfg := newConfig(t)
	s := startWrapped(t, h, cfg, orphanScript, procOptions{prefix: prefix})
	hpid := s.Pid()
	if len(prefix) > 0 {
		hpid = 0
		for end := time.Now().Add(5 * time.Second); hpid == 0 && time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
			for _, p := range childrenOf(s.Pid()) {
				if p.comm == "hapsuper" {
					hpid = p.pid
				}
			}
		}
		if hpid == 0 {
			t.Fatalf("no hapsuper child of %s (pid %d)", prefix[0], s.Pid())
		}
	}
	most := watchOrphans(hpid, (orphanSleep+10)*time.Second)
	s.waitReady(cfg.webAddr())
	t.Logf("hapsuper is pid %d on the host; at most %d of %d orphan sleeps were its children at once", hpid, most, orphans)
	if most < orphans/4 {
		t.Errorf("hapsuper inherited at most %d orphans at once: it is not their reaper, or the test did not make enough", most)
	}
	checkReaped(t, hpid)

	term := time.Now()
	if err := syscall.Kill(hpid, syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM hapsuper (host pid %d): %v", hpid, err)
	}
	code, exitAt := s.waitExit(10 * time.Second)
	t.Logf("exit %d after %s", code, exitAt.Sub(term))
	s.checkClean(code)
}
