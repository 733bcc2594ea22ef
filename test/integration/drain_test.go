package integration

import (
	"syscall"
	"testing"
	"time"

	"github.com/hapsuper/hapsuper/test/harness"
)

// The timings of fastFlags, and the scheduling tolerance of this 2-core
// box: a poll may run late by that much when two tests share the CPUs.
const (
	quietPeriod    = time.Second
	pollInterval   = 100 * time.Millisecond
	schedTolerance = 300 * time.Millisecond
)

// checkQuietEnd asserts that the drain ended for reason quiet, no sooner than
// a quiet period (less one poll) after the last request sent, and no later
// than a quiet period plus two polls plus the scheduling tolerance.
func checkQuietEnd(t *testing.T, ended harness.Entry, lastSent time.Time) {
	t.Helper()
	if r := ended.Str("reason"); r != "quiet" {
		t.Errorf("drain ended with reason %q (detail %q), want quiet", r, ended.Str("detail"))
	}
	gap := ended.At.Sub(lastSent)
	t.Logf("drain ended %s after the last request sent (window [%s, %s])",
		gap, quietPeriod-pollInterval, quietPeriod+2*pollInterval+schedTolerance)
	if gap < quietPeriod-pollInterval {
		t.Errorf("drain ended %s after the last request: sooner than the quiet period %s", gap, quietPeriod)
	}
	if gap > quietPeriod+2*pollInterval+schedTolerance {
		t.Errorf("drain ended %s after the last request: later than quiet %s + 2 polls + %s", gap, quietPeriod, schedTolerance)
	}
}

// checkNotCutShort is checkQuietEnd for drains under reloads: a reload can
// hide a worker's last counters (it exits between two polls, or the 2.6
// master refuses a poll while it re-executes), and the drain then restarts
// its quiet clock rather than risk ending early. So the drain may end later
// than quiet + 2 polls, or at the bound, but never sooner than the quiet
// period after the last request, and never after the bound.
func checkNotCutShort(t *testing.T, ended harness.Entry, lastSent, bound time.Time) {
	t.Helper()
	switch r := ended.Str("reason"); r {
	case "quiet", "bound", "unavailable":
	default:
		t.Errorf("drain ended with reason %q (detail %q), want quiet, bound or unavailable", r, ended.Str("detail"))
	}
	if gap := ended.At.Sub(lastSent); gap < quietPeriod-pollInterval {
		t.Errorf("drain ended %s after the last request: sooner than the quiet period %s", gap, quietPeriod)
	}
	if late := ended.At.Sub(bound); late > pollInterval+schedTolerance {
		t.Errorf("drain ended %s after the bound", late)
	}
}

// latest returns the latest of ts.
func latest(ts ...time.Time) time.Time {
	var l time.Time
	for _, t := range ts {
		if t.After(l) {
			l = t
		}
	}
	return l
}

// checkNoHAProxyLeft asserts that no process of the test's HAProxy is alive.
func checkNoHAProxyLeft(t *testing.T, dir string) {
	t.Helper()
	if left := waitGone(dir, 2*time.Second); len(left) > 0 {
		t.Errorf("%d HAProxy processes left after hapsuper exited: %v", len(left), left)
	}
}

// TestDrain_ContinuousClients_QuietAfterLastRequest: with a client opening a
// connection every 20 ms and a keep-alive client, SIGTERM starts a drain in
// which nothing fails; once the clients stop, the drain ends quiet one quiet
// period later, and hapsuper exits 0.
func TestDrain_ContinuousClients_QuietAfterLastRequest(t *testing.T) {
	eachHAProxy(t, func(t *testing.T, h haproxyVersion) {
		dir := t.TempDir()
		cfg := newConfig(t, startBackend(t))
		s := startSupervisor(t, h, dir, cfg.write(t, dir), fastFlags...)
		s.waitReady(cfg.webAddr())

		cont := startContinuous(t, cfg.webAddr(), 20*time.Millisecond, 30*time.Second)
		ka := startKeepAlive(t, cfg.webAddr(), 100*time.Millisecond, 30*time.Second)
		time.Sleep(time.Second)
		term := s.signal(syscall.SIGTERM)
		started := s.waitLog("drain started", 2*time.Second)
		time.Sleep(1500 * time.Millisecond)
		cont.stop()
		ka.stop()
		ended := s.waitLog("drain ended", 10*time.Second)
		soft := s.waitLog("soft stop", 2*time.Second)
		code, exitAt := s.waitExit(10 * time.Second)
		t.Log(cont.rec.summary())
		t.Log(ka.rec.summary())
		t.Logf("drain started %s after SIGTERM, ended after %s, soft stop after %s, exit %d after %s",
			started.At.Sub(term), ended.At.Sub(term), soft.At.Sub(term), code, exitAt.Sub(term))

		for _, r := range []*recorder{cont.rec, ka.rec} {
			if len(r.all()) < 10 {
				t.Errorf("%s: too few requests to mean anything", r.summary())
			}
			if bad := r.where(func(o outcome) bool { return o.start.Before(soft.At) && o.kind != harness.KindOK }); len(bad) > 0 {
				t.Errorf("%s: %d requests started before the soft stop failed:%s", r.name, len(bad), describe(bad, 5))
			}
		}
		checkQuietEnd(t, ended, latest(cont.rec.lastStart(), ka.rec.lastStart()))
		if code != 0 {
			t.Errorf("exit code %d after a clean drain, want 0", code)
		}
		checkNoHAProxyLeft(t, dir)
	})
}

// TestDrain_PausingClient_EndsQuietDuringPause documents the limit of a
// quiet-only drain: a client that pauses longer than the quiet period ends
// the drain during its pause. Until then the listeners accept; after the
// soft stop they refuse.
func TestDrain_PausingClient_EndsQuietDuringPause(t *testing.T) {
	eachHAProxy(t, func(t *testing.T, h haproxyVersion) {
		dir := t.TempDir()
		cfg := newConfig(t, startBackend(t))
		s := startSupervisor(t, h, dir, cfg.write(t, dir), fastFlags...)
		s.waitReady(cfg.webAddr())

		p := startPausing(t, cfg.webAddr(), 20*time.Millisecond, time.Second, 3*time.Second, 10*time.Second)
		time.Sleep(500 * time.Millisecond)
		term := s.signal(syscall.SIGTERM)
		for end := time.Now().Add(3 * time.Second); p.pauses().IsZero() && time.Now().Before(end); {
			time.Sleep(10 * time.Millisecond)
		}
		pauseStart := p.pauses()
		if pauseStart.IsZero() {
			t.Fatal("the pausing client did not pause")
		}
		ended := s.waitLog("drain ended", 6*time.Second)
		soft := s.waitLog("soft stop", 2*time.Second)
		for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
			if _, pe := p.pauseWindow(); !pe.IsZero() && time.Since(pe) > time.Second {
				break
			}
		}
		p.stop()
		code, exitAt := s.waitExit(10 * time.Second)
		_, pauseEnd := p.pauseWindow()
		t.Log(p.rec.summary())
		t.Logf("SIGTERM at +0; pause %s..%s; drain ended %s (%s); soft stop %s; exit %d at %s",
			pauseStart.Sub(term), pauseEnd.Sub(term), ended.At.Sub(term), ended.Str("reason"),
			soft.At.Sub(term), code, exitAt.Sub(term))

		// No extra probe connection here: a bare connection counts as activity
		// and would move the quiet end; the client's own requests between the
		// SIGTERM and the pause are the connection attempts during the drain.
		during := p.rec.where(func(o outcome) bool { return o.start.After(term) && o.start.Before(ended.At) })
		if len(during) == 0 {
			t.Error("no connection attempt between the SIGTERM and the end of the drain")
		}
		for _, o := range during {
			if o.kind != harness.KindOK {
				t.Errorf("connection attempt during the drain failed: %v", o)
				break
			}
		}
		if pauseEnd.IsZero() || !ended.At.After(pauseStart) || !ended.At.Before(pauseEnd) {
			t.Errorf("drain ended at %s, outside the pause %s..%s", ended.At.Sub(term), pauseStart.Sub(term), pauseEnd.Sub(term))
		}
		before := p.rec.where(func(o outcome) bool { return o.start.Before(pauseStart) })
		checkQuietEnd(t, ended, before[len(before)-1].start)
		if bad := p.rec.where(func(o outcome) bool { return o.start.Before(soft.At) && o.kind != harness.KindOK }); len(bad) > 0 {
			t.Errorf("%d requests before the soft stop failed:%s", len(bad), describe(bad, 5))
		}
		after := p.rec.where(func(o outcome) bool { return o.start.After(soft.At.Add(100 * time.Millisecond)) })
		if len(after) == 0 {
			t.Error("no request after the soft stop: the pause was too long for the test")
		}
		if bad := p.rec.where(func(o outcome) bool { return o.kind != harness.KindOK && o.kind != harness.KindRefused }); len(bad) > 0 {
			t.Errorf("%d requests failed otherwise than refused:%s", len(bad), describe(bad, 5))
		}
		for _, o := range after {
			if o.kind != harness.KindRefused {
				t.Errorf("request after the soft stop, listener should be closed: %v", o)
				break
			}
		}
		if code != 0 {
			t.Errorf("exit code %d, want 0", code)
		}
		checkNoHAProxyLeft(t, dir)
	})
}
