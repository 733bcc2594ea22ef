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
		killAt := time.Now()
		if err := syscall.Kill(workers[0], syscall.SIGKILL); err != nil {
			t.Fatalf("kill worker %d: %v", workers[0], err)
		}
		code, exitAt := s.waitExit(5 * time.Second)
		exited, _ := s.Find("haproxy exited", nil)
		t.Logf("worker %d SIGKILLed; hapsuper exited %d after %s; haproxy exited log: %s",
			workers[0], code, exitAt.Sub(killAt), exited.Raw)

		if d := exitAt.Sub(killAt); d > time.Second {
			t.Errorf("hapsuper exited %s after the worker was killed, want ≤ 1s", d)
		}
		if code != masterCodeWorkerKilled {
			t.Errorf("exit code %d, want the master's %d", code, masterCodeWorkerKilled)
		}
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
		killAt := time.Now()
		if err := syscall.Kill(d.MasterPid, syscall.SIGKILL); err != nil {
			t.Fatalf("kill master %d: %v", d.MasterPid, err)
		}
		code, exitAt := s.waitExit(5 * time.Second)
		t.Logf("master %d SIGKILLed (workers %v); hapsuper exited %d after %s",
			d.MasterPid, d.currentWorkers(), code, exitAt.Sub(killAt))

		if d := exitAt.Sub(killAt); d > time.Second {
			t.Errorf("hapsuper exited %s after the master was killed, want ≤ 1s", d)
		}
		if code != 128+int(syscall.SIGKILL) {
			t.Errorf("exit code %d, want %d", code, 128+int(syscall.SIGKILL))
		}
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
