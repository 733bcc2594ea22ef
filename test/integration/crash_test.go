package integration

import (
	"syscall"
	"testing"
	"time"
)

// TestCrash_WorkerKilled: when the worker is SIGKILLed the master exits
// on its own (code 137, see TestHarness_BareWorkerKilled); hapsuper exits
// within 1 s with that code and leaves no HAProxy process.
func TestCrash_WorkerKilled(t *testing.T) {
	eachHAProxy(t, func(t *testing.T, h haproxyVersion) {
		s := serve(t, h, newConfig(t), fast.flags()...)
		workers := s.waitWorkers().currentWorkers()
		killAndCheckExit(t, s, "worker", workers[0], masterCodeWorkerKilled)
		exited, _ := s.Find("haproxy exited", nil)
		t.Logf("haproxy exited log: %s", exited.Raw)
		if c, ok := exited.Num("code"); !ok || int(c) != masterCodeWorkerKilled {
			t.Errorf(`"haproxy exited" code field = %v, want %d`, exited.Fields["code"], masterCodeWorkerKilled)
		}
		checkNoHAProxyLeft(t, s.dir)
	})
}

// TestCrash_MasterKilled: when the master is SIGKILLed hapsuper exits within
// 1 s with 128+9, and no worker is left behind.
func TestCrash_MasterKilled(t *testing.T) {
	eachHAProxy(t, func(t *testing.T, h haproxyVersion) {
		s := serve(t, h, newConfig(t), fast.flags()...)
		d := s.waitWorkers()
		if d.MasterPid <= 0 || !alive(d.MasterPid) {
			t.Fatalf("status masterPid %d is not a live process", d.MasterPid)
		}
		killAndCheckExit(t, s, "master", d.MasterPid, 128+int(syscall.SIGKILL))
		// hapsuper SIGKILLs the group before it exits; the kernel tears a
		// killed process down asynchronously, so allow it 1 s to go.
		for _, w := range d.currentWorkers() {
			for end := time.Now().Add(time.Second); alive(w) && time.Now().Before(end); {
				time.Sleep(10 * time.Millisecond)
			}
			if alive(w) {
				t.Errorf("worker %d still alive 1 s after hapsuper exited", w)
			}
		}
		checkNoHAProxyLeft(t, s.dir)
	})
}

// killAndCheckExit SIGKILLs pid (what: "worker" or "master") and asserts
// that hapsuper exits within 1 s with wantCode.
func killAndCheckExit(t *testing.T, s *supervisor, what string, pid, wantCode int) {
	t.Helper()
	killAt := time.Now()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill %s %d: %v", what, pid, err)
	}
	code, exitAt := s.waitExit(5 * time.Second)
	t.Logf("%s %d SIGKILLed; hapsuper exited %d after %s", what, pid, code, exitAt.Sub(killAt))
	if d := exitAt.Sub(killAt); d > time.Second {
		t.Errorf("hapsuper exited %s after the %s was killed, want ≤ 1s", d, what)
	}
	if code != wantCode {
		t.Errorf("exit code %d, want the master's %d", code, wantCode)
	}
}
