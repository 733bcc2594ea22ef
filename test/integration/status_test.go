package integration

import (
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestStatus_ServingDrainingStopping: `hapsuper status` (text and --json)
// tells the phase, the master and its workers with their sessions while
// serving, the drain's times and conditions while draining, and the reason
// once the drain has ended.
func TestStatus_ServingDrainingStopping(t *testing.T) {
	eachHAProxy(t, func(t *testing.T, h haproxyVersion) {
		b := roomy
		dir := t.TempDir()
		cfg := newConfig(t)
		cfg.StatsSocket = filepath.Join(dir, "stats.sock") // a worker socket must not confuse hapsuper
		s := startSupervisor(t, h, dir, cfg.write(t, dir), b.flags()...)
		s.waitReady(cfg.webAddr())

		// Serving.
		d := s.waitWorkers()
		t.Logf("serving: %+v", d)
		if d.Phase != "serving" {
			t.Errorf("phase %q while serving", d.Phase)
		}
		if p, ok := readProc(d.MasterPid); !ok || p.comm != "haproxy" {
			t.Errorf("masterPid %d is not a live haproxy process", d.MasterPid)
		}
		cur := d.currentWorkers()
		if len(cur) == 0 || !alive(cur[0]) {
			t.Errorf("no live current worker listed: %+v", d.Workers)
		}
		checkText(t, s, "serving", strconv.Itoa(d.MasterPid))

		// Draining, with a request in flight and a client sending.
		slow := startSlow(t, cfg.webAddr(), 4*time.Second)
		cont := startContinuous(t, cfg.webAddr(), 20*time.Millisecond, 20*time.Second)
		time.Sleep(300 * time.Millisecond)
		term := s.signal(syscall.SIGTERM)
		s.waitLog("drain started", 2*time.Second)
		d = s.statusJSON()
		t.Logf("draining: phase %s drain %+v workers %+v", d.Phase, d.Drain, d.Workers)
		if d.Phase != "draining" || d.Drain == nil {
			t.Fatalf("phase %q drain %v during the drain", d.Phase, d.Drain)
		}
		stop := parseTime(t, "stopRequested", d.Drain.StopRequested)
		if off := stop.Sub(term); off < -time.Second || off > time.Second {
			t.Errorf("stopRequested %s is %s away from the SIGTERM", stop, off)
		}
		// Within 1 s: the document may carry whole seconds only.
		if dl := parseTime(t, "deadline", d.Drain.Deadline).Sub(stop); (dl - b.deadline()).Abs() >= time.Second {
			t.Errorf("deadline is stop + %s, want + %s", dl, b.deadline())
		}
		if bd := parseTime(t, "bound", d.Drain.Bound).Sub(stop); (bd - b.bound()).Abs() >= time.Second {
			t.Errorf("bound is stop + %s, want + %s", bd, b.bound())
		}
		if d.Drain.Reason != "" {
			t.Errorf("reason %q before the drain ended", d.Drain.Reason)
		}
		if !hasCondition(d, "quiet") {
			t.Errorf("no quiet condition listed: %+v", d.Drain.Conditions)
		}
		// The workers' counters are read a poll interval apart, and the
		// slow request may reach HAProxy after the drain started on a
		// loaded machine: within 2 s of it (the request runs 4 s).
		for deadline := time.Now().Add(2 * time.Second); sessions(d) < 1 && time.Now().Before(deadline); {
			time.Sleep(50 * time.Millisecond)
			d = s.statusJSON()
		}
		if sessions(d) < 1 {
			t.Errorf("workers list no session while a request is in flight, 2 s after the drain started: %+v", d.Workers)
		}
		checkText(t, s, "draining")

		// Stopping: the client stopped, the drain ended quiet, the slow request
		// still runs.
		cont.stop()
		s.waitLog("drain ended", 5*time.Second)
		d, ok := s.waitStatus(2*time.Second, func(d statusDoc) bool { return d.Phase == "stopping" })
		t.Logf("stopping: phase %s drain %+v workers %+v", d.Phase, d.Drain, d.Workers)
		if !ok || d.Drain == nil {
			t.Fatalf("phase %q after the drain ended, want stopping", d.Phase)
		}
		if d.Drain.Reason != "quiet" {
			t.Errorf("reason %q after a quiet drain", d.Drain.Reason)
		}
		parseTime(t, "softStop", d.Drain.SoftStop)
		if sessions(d) < 1 {
			t.Errorf("workers list no session while the slow request is in flight: %+v", d.Workers)
		}
		checkText(t, s, "stopping", "quiet")

		slow.wait(10 * time.Second)
		code, exitAt := s.waitExit(10 * time.Second)
		t.Log(cont.rec.summary())
		t.Log(slow.rec.summary())
		t.Logf("exit %d after %s", code, exitAt.Sub(term))
		s.checkClean(code)
	})
}

// checkText runs `hapsuper status` and checks that it mentions each want.
func checkText(t *testing.T, s *supervisor, want ...string) {
	t.Helper()
	out, errs, code := s.runStatus()
	t.Logf("hapsuper status:\n%s", out)
	if code != 0 {
		t.Errorf("hapsuper status exited %d: %s", code, errs)
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("hapsuper status does not mention %q", w)
		}
	}
}

func parseTime(t *testing.T, name, v string) time.Time {
	t.Helper()
	ts, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		t.Errorf("drain.%s = %q is not an RFC 3339 time", name, v)
	}
	return ts
}

func hasCondition(d statusDoc, name string) bool {
	for _, c := range d.Drain.Conditions {
		if c.Name == name {
			return true
		}
	}
	return false
}

// sessions sums the sessions of every worker listed.
func sessions(d statusDoc) int64 {
	var n int64
	for _, w := range d.Workers {
		n += w.Sessions
	}
	return n
}
