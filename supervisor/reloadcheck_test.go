package supervisor

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A check that exits while a process it started still holds its output
// (a lua-load's os.execute("sleep 60 &"), in the check's process group or
// in a session of its own) is over checkOutputGrace after its exit, not
// when that process ends, and keeps what it wrote.
func TestReloadCheckEndsAtItsExit(t *testing.T) {
	for _, tc := range []struct{ name, start string }{
		{"same group", "sleep 60"},
		{"own session", "setsid sleep 60"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			left := filepath.Join(t.TempDir(), "left")
			t.Cleanup(func() { killLeft(t, left) })
			script := `echo "[NOTICE]   (7) : checked"; ` + tc.start + ` & echo $! >` + left + `; exit 0`
			c, err := startReloadCheck([]string{"/bin/sh", script}, nil, "SIGHUP", t0)
			if err != nil {
				t.Fatal(err)
			}
			ws := waitMaster(t, c.pid)
			exited := time.Now()
			c.reaped(exitCode(ws))
			select {
			case out := <-c.out:
				c.output, c.outDone = out, true
			case <-time.After(5 * time.Second):
				t.Fatal("the output of a check that exited still read 5 s later: a process it left holds the pipe")
			}
			took := time.Since(exited)
			t.Logf("output done %v after the exit (grace %v): %q", took.Round(time.Millisecond), checkOutputGrace, c.output)
			if !c.done() || c.failure() != "" {
				t.Errorf("done %v, failure %q: want a passed check", c.done(), c.failure())
			}
			if !strings.Contains(string(c.output), "[NOTICE]   (7) : checked") {
				t.Errorf("output %q lost what the check wrote", c.output)
			}
		})
	}
}

// A check killed at the timeout is over checkOutputGrace after the kill,
// even when a process it started in a session of its own (out of the
// group the kill reaches) holds its output.
func TestReloadCheckEndsAtItsKill(t *testing.T) {
	left := filepath.Join(t.TempDir(), "left")
	t.Cleanup(func() { killLeft(t, left) })
	c, err := startReloadCheck([]string{"/bin/sh", `echo "[NOTICE]   (7) : parsing"; setsid sh -c 'echo $$ >` + left + `; exec sleep 60' & sleep 60`}, nil, "SIGHUP", t0)
	if err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) { // the sleep in its own session started
		if b, _ := os.ReadFile(left); len(b) > 0 {
			break
		}
		if time.Now().After(end) {
			t.Fatal("the script did not start its sleep within 5 s")
		}
	}
	if err := c.kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	select {
	case out := <-c.out:
		c.output, c.outDone = out, true
	case <-time.After(5 * time.Second):
		t.Fatal("the output of a killed check still read 5 s later: a process in its own session holds the pipe")
	}
	t.Logf("output done %v after the kill (grace %v): %q", time.Since(killed).Round(time.Millisecond), checkOutputGrace, c.output)
	c.reaped(exitCode(waitMaster(t, c.pid)))
	if got := c.failure(); !c.done() || !strings.Contains(got, "did not finish") {
		t.Errorf("failure %q (done %v), want one that says it did not finish", got, c.done())
	}
}

// killLeft SIGKILLs the process whose pid a check script wrote to path.
func killLeft(t *testing.T, path string) {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Errorf("the script did not name the process it left: %v", err)
		return
	}
	if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 1 {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}
