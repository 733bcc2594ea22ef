package integration

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestInstance_SecondRunRefused: a second hapsuper over the same runtime
// directory (a `kubectl exec … -- hapsuper` in an image that sets
// HAPSUPER_COMPANION) exits 2 naming the first one's pid and directory
// and what to do, before it starts anything: the first keeps its status
// socket, its master socket and its only HAProxy master, and drains as
// usual. A second one with its own status socket but the first one's
// master socket is refused too: that socket answers.
func TestInstance_SecondRunRefused(t *testing.T) {
	eachHAProxy(t, func(t *testing.T, h haproxyVersion) {
		dir := t.TempDir()
		cfg := newConfig(t)
		path := cfg.write(t, dir)
		first := startSupervisor(t, h, dir, path, fast.flags()...)
		first.waitReady(cfg.webAddr())
		before := first.waitWorkers()

		second := startCommand(t, dir, procOptions{}, supervisorArgs(dir, fast.flags(), h.command(t, dir), "-f", path))
		code, _ := second.waitExit(30 * time.Second)
		failed := second.All("hapsuper failed")
		t.Logf("second: exit %d, %d lines", code, len(second.Lines()))
		if code != 2 || len(failed) != 1 {
			second.dumpLogs()
			t.Fatalf("second hapsuper: exit %d with %d failure lines, want 2 and one", code, len(failed))
		}
		msg := failed[0].Str("err")
		for _, want := range []string{"pid " + strconv.Itoa(first.Pid()), dir, "hapsuper status"} {
			if !strings.Contains(msg, want) {
				t.Errorf("the refusal %q does not name %q", msg, want)
			}
		}
		if n := len(second.All("haproxy started")); n != 0 {
			t.Errorf("the second hapsuper started HAProxy (%d times)", n)
		}

		// A status socket of its own, the first one's master socket.
		other := t.TempDir()
		args := supervisorArgs(other, fast.flags(), h.command(t, dir), "-f", path)
		for i, a := range args {
			if a == filepath.Join(other, "master.sock") {
				args[i] = filepath.Join(dir, "master.sock")
			}
		}
		third := startCommand(t, other, procOptions{}, args)
		code, _ = third.waitExit(30 * time.Second)
		if failed := third.All("hapsuper failed"); code != 2 || len(failed) != 1 || !strings.Contains(failed[0].Str("err"), "master socket") {
			third.dumpLogs()
			t.Errorf("hapsuper over a master socket that answers: exit %d, %d failure lines; want 2 naming the master socket", code, len(failed))
		}

		after := first.statusJSON()
		if after.MasterPid != before.MasterPid || after.Phase != "serving" {
			t.Errorf("the first hapsuper's status socket shows master %d phase %s, want its own master %d serving", after.MasterPid, after.Phase, before.MasterPid)
		}
		masters := 0
		for _, p := range procsMentioning(path) {
			if p.ppid == first.Pid() {
				masters++
			}
		}
		if all := procsMentioning(path); masters != 1 {
			t.Errorf("%d HAProxy masters under the first hapsuper, want 1 (processes with the config: %d)", masters, len(all))
		}
		first.stopClean()
		if n := len(first.All("drain ended")); n != 1 {
			t.Errorf("the first hapsuper logged %d drain ends, want 1", n)
		}
	})
}
