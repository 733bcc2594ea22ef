package supervisor

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hapsuper/hapsuper/drain"
	"github.com/hapsuper/hapsuper/runtimeapi"
	"github.com/hapsuper/hapsuper/status"
)

// Scenario tests of reloads: the check (haproxy -c) is a fake whose exit
// and output the test hands to the loop; the master's show proc line comes
// with every poll (sc.reloadCount, sc.failedCount).

// wantReloads fails unless status shows these totals and a last reload
// with this result, whose detail contains detail.
func (sc *scenario) wantReloads(ok, refused, failed int, last status.ReloadResult, detail string) status.Reload {
	sc.t.Helper()
	r := sc.l.board.Load().Reloads
	if r.OK != ok || r.Refused != refused || r.Failed != failed {
		sc.t.Fatalf("reloads ok %d refused %d failed %d, want %d %d %d", r.OK, r.Refused, r.Failed, ok, refused, failed)
	}
	if r.Last == nil || r.Last.Result != last || !strings.Contains(r.Last.Detail, detail) {
		sc.t.Fatalf("last reload %+v, want result %s with detail containing %q", r.Last, last, detail)
	}
	return *r.Last
}

// wantCurrent fails unless status shows exactly these workers as current.
func (sc *scenario) wantCurrent(pids ...int) {
	sc.t.Helper()
	var cur []int
	for _, w := range sc.l.board.Load().Workers {
		if !w.Old {
			cur = append(cur, w.PID)
		}
	}
	if len(cur) != len(pids) || (len(pids) > 0 && cur[0] != pids[0]) {
		sc.t.Fatalf("current workers %v, want %v", cur, pids)
	}
}

const alertOutput = `[NOTICE]   (12) : haproxy version is 3.2.26-1
[ALERT]    (12) : config : parsing [/etc/haproxy/haproxy.cfg:10] : unknown keyword 'bogus' in 'global' section
[ALERT]    (12) : config : Fatal errors found in configuration.
`

// A reload whose configuration does not load is refused: no SIGUSR2, the
// serving worker stays current, and status says why with HAProxy's alerts.
func TestReloadRefusedByCheck(t *testing.T) {
	sc := newScenario(t, testSettings, nil)
	sc.signal(sec(1), syscall.SIGHUP)
	sc.wantReloads(0, 0, 0, status.ReloadChecking, "")
	sc.checkDone(sec(1.2), 1, alertOutput)
	sc.wantSent()
	r := sc.wantReloads(0, 1, 0, status.ReloadRefused, "haproxy -c exited 1: config : parsing [/etc/haproxy/haproxy.cfg:10] : unknown keyword 'bogus' in 'global' section; config : Fatal errors found in configuration.")
	if r.Origin != "SIGHUP" || !r.At.Equal(t0.Add(sec(1))) || !r.Ended.Equal(t0.Add(sec(1.2))) {
		t.Errorf("refused reload %+v, want origin SIGHUP, asked at 1s, ended at 1.2s", r)
	}
	sc.poll(sec(2), worker{pid: 100})
	sc.wantCurrent(100)
}

// A reload that passes its check is sent, and is ok once a new worker is
// listed current with the master's reload count moved.
func TestReloadOK(t *testing.T) {
	sc := newScenario(t, testSettings, nil)
	sc.signal(sec(1), syscall.SIGUSR2)
	sc.checkDone(sec(1.1), 0, "")
	sc.wantSent("SIGUSR2@1.1s")
	sc.wantReloads(0, 0, 0, status.ReloadReloading, "")
	sc.poll(sec(1.2), worker{pid: 100}) // not re-executed yet
	sc.wantReloads(0, 0, 0, status.ReloadReloading, "")
	sc.reloadCount = 1
	sc.poll(sec(1.3), worker{pid: 101}, worker{pid: 100, old: true})
	r := sc.wantReloads(1, 0, 0, status.ReloadOK, "")
	if r.Worker != 101 || r.Origin != "SIGUSR2" {
		t.Errorf("reload %+v, want new worker 101, origin SIGUSR2", r)
	}
	if sc.l.reloads.underway() {
		t.Error("a reload is still under way after it ended")
	}
}

// HAProxy 3.1+ after a failed reload: [failed: 1], no current worker, the
// serving one listed old and not stopping. The reload failed at once, and
// status shows the serving worker as current. A second failure leaves
// [failed: 1] as it is: it fails once no new worker came for reloadSettle.
func TestReloadFailedKeepsServingWorkerCurrent(t *testing.T) {
	sc := newScenario(t, testSettings, nil)
	sc.signal(sec(1), syscall.SIGHUP)
	sc.checkDone(sec(1), 0, "") // a port already bound passes the check
	sc.reloadCount, sc.failedCount = 1, 1
	sc.poll(sec(1.1), worker{pid: 100, old: true})
	sc.wantReloads(0, 0, 1, status.ReloadFailed, "worker [100] still serves the previous configuration")
	sc.wantCurrent(100)

	sc.signal(sec(5), syscall.SIGHUP)
	sc.checkDone(sec(5), 0, "")
	sc.reloadCount = 2
	sc.poll(sec(5.1), worker{pid: 100, old: true})
	sc.poll(sec(6.9), worker{pid: 100, old: true})
	sc.wantReloads(0, 0, 1, status.ReloadReloading, "")
	sc.poll(sec(7.1), worker{pid: 100, old: true})
	sc.wantReloads(0, 0, 2, status.ReloadFailed, "worker [100]")
	sc.wantSent("SIGUSR2@1s", "SIGUSR2@5s")
}

// A reload hapsuper did not send (a controller's `reload` on the master
// CLI) is seen when the master's count moves, and judged the same way.
func TestReloadFromMasterCLI(t *testing.T) {
	sc := newScenario(t, testSettings, nil)
	sc.reloadCount = 1
	sc.poll(sec(1), worker{pid: 100}) // 2.6 and 3.0: the worker stays current
	sc.wantReloads(0, 0, 0, status.ReloadReloading, "")
	sc.poll(sec(3), worker{pid: 100})
	r := sc.wantReloads(0, 0, 1, status.ReloadFailed, "worker [100]")
	if r.Origin != "master CLI" {
		t.Errorf("origin %q, want master CLI", r.Origin)
	}
	sc.reloadCount = 2
	sc.poll(sec(4), worker{pid: 101}, worker{pid: 100, old: true, stopping: true})
	sc.wantReloads(1, 0, 1, status.ReloadOK, "")
	sc.wantSent()
}

// A master that counts no reload 10 s after SIGUSR2 did not take it.
func TestReloadNotTaken(t *testing.T) {
	sc := newScenario(t, testSettings, nil)
	sc.signal(sec(1), syscall.SIGHUP)
	sc.checkDone(sec(1), 0, "")
	sc.poll(sec(10.9), worker{pid: 100})
	sc.wantReloads(0, 0, 0, status.ReloadReloading, "")
	sc.poll(sec(11), worker{pid: 100})
	sc.wantReloads(0, 0, 1, status.ReloadFailed, "counted no reload")
}

// One check at a time: a request during a check waits for it and is
// checked after it (the files may have changed again); a check that runs
// too long is killed and its reload refused.
func TestReloadQueuedAndTimedOut(t *testing.T) {
	sc := newScenario(t, testSettings, nil)
	sc.signal(sec(1), syscall.SIGHUP)
	sc.signal(sec(1.5), syscall.SIGHUP)
	sc.signal(sec(1.6), syscall.SIGUSR2)
	if sc.checks != 1 {
		t.Fatalf("%d checks started, want 1 while the first runs", sc.checks)
	}
	sc.checkDone(sec(2), 0, "")
	sc.wantSent("SIGUSR2@2s")
	if sc.checks != 2 || sc.l.check == nil || sc.l.check.origin != "SIGUSR2" {
		t.Fatalf("checks %d, running %+v: want the queued SIGUSR2's check started", sc.checks, sc.l.check)
	}
	sc.tick(sec(2) + reloadCheckTimeout - sec(0.1))
	sc.wantSent("SIGUSR2@2s")
	sc.tick(sec(2) + reloadCheckTimeout)
	sc.wantSent("SIGUSR2@2s", "KILL-CHECK-1002@17s")
	sc.checkDone(sec(17.1), 128+int(syscall.SIGKILL), "")
	sc.wantSent("SIGUSR2@2s", "KILL-CHECK-1002@17s")
	sc.wantReloads(0, 1, 0, status.ReloadRefused, "did not finish within 15s")
}

// A check that passes once the soft stop was sent is not sent: its new
// workers would listen again.
func TestReloadCheckedWhileSoftStopping(t *testing.T) {
	sc := newScenario(t, testSettings, nil)
	sc.signal(sec(1), syscall.SIGTERM)
	sc.signal(sec(2.9), syscall.SIGHUP)
	sc.poll(sec(3), worker{pid: 100}) // quiet since 1s: soft stop
	sc.wantSent("SIGUSR1@3s")
	sc.checkDone(sec(3.1), 0, "")
	sc.wantSent("SIGUSR1@3s")
	if r := sc.l.board.Load().Reloads; r.Last != nil || r.OK+r.Refused+r.Failed != 0 {
		t.Errorf("reloads %+v, want none recorded", r)
	}
}

func TestAlerts(t *testing.T) {
	for _, tc := range []struct{ out, want string }{
		{alertOutput, "config : parsing [/etc/haproxy/haproxy.cfg:10] : unknown keyword 'bogus' in 'global' section; config : Fatal errors found in configuration."},
		{"[NOTICE]   (1) : x\nsomething odd\n\n", "something odd"},
		{"", "no output"},
		{strings.Repeat("[ALERT]    (1) : e\n", 9), "e; e; e; e; e"},
		{"[ALERT] (1) : " + strings.Repeat("x", 400), strings.Repeat("x", maxAlertLineLen) + "…"},
	} {
		if got := alerts([]byte(tc.out)); got != tc.want {
			t.Errorf("alerts(%.40q) = %q, want %q", tc.out, got, tc.want)
		}
	}
}

// startReloadCheck runs argv[0] -c argv[1:]: with /bin/sh as the binary
// that is a script, whose output and exit arrive as a check's do. A child
// it leaves holding the pipe is killed with the group.
func TestStartReloadCheck(t *testing.T) {
	script := `echo "[ALERT]    (7) : config : bad"; echo "[NOTICE] x" >&2; exit 3`
	c, err := startReloadCheck([]string{"/bin/sh", script}, nil, "SIGHUP", t0)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case out := <-c.out:
		c.output, c.outDone = out, true
	case <-time.After(5 * time.Second):
		t.Fatal("no output 5 s after the check started")
	}
	ws := waitMaster(t, c.pid)
	c.code, c.exited = exitCode(ws), true
	if got, want := c.failure(), "haproxy -c exited 3: config : bad"; !c.done() || got != want {
		t.Errorf("failure %q (done %v), want %q", got, c.done(), want)
	}

	hang, err := startReloadCheck([]string{"/bin/sh", "sleep 60 & sleep 60"}, nil, "SIGHUP", t0)
	if err != nil {
		t.Fatal(err)
	}
	if err := hang.kill(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-hang.out: // the pipe closed: every process of the group is gone
	case <-time.After(5 * time.Second):
		t.Fatal("the pipe of a killed check is still open 5 s later")
	}
	hang.code, hang.exited = exitCode(waitMaster(t, hang.pid)), true
	if got := hang.failure(); !strings.Contains(got, "did not finish") {
		t.Errorf("failure of a killed check %q, want it to say it did not finish", got)
	}
}

// HAProxy 3.1+ lists a new worker that still starts (loading, or retrying
// a bind for up to ~2 s) while the master cannot reach it: no verdict
// while it is there, failed once it is gone without serving.
func TestReloadWaitsForAStartingWorker(t *testing.T) {
	sc := newScenario(t, testSettings, nil)
	sc.signal(sec(1), syscall.SIGHUP)
	sc.checkDone(sec(1), 0, "")
	sc.reloadCount = 1
	starting := func(off time.Duration) {
		o := observation{started: t0.Add(off), obs: drain.Observation{At: t0.Add(off), Workers: []drain.Worker{{PID: 100}}}}
		o.sample.Master = runtimeapi.Process{PID: 42, Role: "master", Reloads: sc.reloadCount}
		o.sample.Workers = []runtimeapi.WorkerSample{{Process: runtimeapi.Process{PID: 100, Old: true}, Info: runtimeapi.Info{PID: 100}}}
		o.sample.Unreachable = []runtimeapi.Process{{PID: 101}}
		sc.event(off, func() { sc.l.onObservation(o) })
	}
	starting(sec(1.1))
	starting(sec(3.5))
	sc.wantReloads(0, 0, 0, status.ReloadReloading, "")
	sc.poll(sec(3.6), worker{pid: 100, old: true})
	sc.wantReloads(0, 0, 1, status.ReloadFailed, "worker [100]")
}
