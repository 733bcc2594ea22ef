package integration

import (
	"syscall"
	"testing"
	"time"

	"github.com/hapsuper/hapsuper/test/harness"
)

// The quiet period and poll interval every test runs with, and the
// scheduling tolerance of a loaded 2-core CI machine: a poll, a tick of
// hapsuper's loop or a log line may come that much late when other test
// runs share the CPUs (300 ms was exceeded at a load average of 3-5).
// Upper bounds only tell an end on time from one that waited for
// something else (the bound, the deadline, seconds away); what a user sees
// is judged by order and by the grace period.
const (
	quietPeriod    = time.Second
	pollInterval   = 100 * time.Millisecond
	schedTolerance = time.Second
)

// budget is the shutdown budget of supervisor/supervisor.go for one grace
// period and margin, measured from the stop request.
type budget struct{ grace, margin time.Duration }

var (
	// fast is what most tests run with: deadline 8 s, bound 5.33 s, SIGKILL
	// of the process group at 9 s.
	fast = budget{grace: 10 * time.Second, margin: 2 * time.Second}
	// roomy leaves a 5 s request time to finish before the deadline (10 s).
	roomy = budget{grace: 12 * time.Second, margin: 2 * time.Second}
)

// flags are hapsuper's flags for the budget, with the suite's quiet period
// and polls.
func (b budget) flags() []string {
	return []string{"--grace-period", b.grace.String(), "--margin", b.margin.String(),
		"--quiet-period", quietPeriod.String(), "--poll-interval", pollInterval.String()}
}

func (b budget) deadline() time.Duration  { return b.grace - b.margin }
func (b budget) bound() time.Duration     { return b.deadline() * 2 / 3 }
func (b budget) killAfter() time.Duration { return min(b.margin/2, time.Second) }

// exitLimit is the latest hapsuper may exit when HAProxy obeys the hard
// stop: before the SIGKILL of its process group would be due.
func (b budget) exitLimit() time.Duration { return b.deadline() + b.killAfter() }

// drainRun is one drain under a client that opens a connection every 20 ms.
type drainRun struct {
	s           *supervisor
	cont        *client
	term        time.Time // when the stop signal was sent
	started     harness.Entry
	ended, soft harness.Entry
	code        int
	exitAt      time.Time
}

// drain starts the client on addr, sends sig half a second later, calls
// during once the drain has started, stops the client (if during did not),
// and waits for the drain to end (its timing is the test's to check) and
// hapsuper to exit.
func (s *supervisor) drain(addr string, sig syscall.Signal, during func(r *drainRun)) drainRun {
	s.t.Helper()
	r := drainRun{s: s, cont: startContinuous(s.t, addr, 20*time.Millisecond, 30*time.Second)}
	time.Sleep(500 * time.Millisecond)
	r.term = s.signal(sig)
	r.started = s.waitLog("drain started", 2*time.Second)
	during(&r)
	r.cont.stop()
	r.ended = s.waitLog("drain ended", 10*time.Second)
	r.soft = s.waitLog("soft stop", time.Second)
	r.code, r.exitAt = s.waitExit(10 * time.Second)
	s.t.Log(r.cont.rec.summary())
	s.t.Logf("drain ended %s after the stop signal (%s: %s); soft stop %s; exit %d after %s", r.ended.At.Sub(r.term),
		r.ended.Str("reason"), r.ended.Str("detail"), r.soft.At.Sub(r.term), r.code, r.exitAt.Sub(r.term))
	return r
}

// checkReason asserts the reason the drain ended with.
func (r drainRun) checkReason(want string) {
	r.s.t.Helper()
	if got := r.ended.Str("reason"); got != want {
		r.s.t.Errorf("drain ended with reason %q (detail %q), want %s", got, r.ended.Str("detail"), want)
	}
}

// boundAt is the bound the "drain started" line gives, on hapsuper's own
// clock, as the drain's log stamps are: an end is judged against it
// without the signal's delivery or the test's scheduling in between.
func (r drainRun) boundAt() time.Time { return r.startedAt("bound") }

// deadlineAt is the deadline the "drain started" line gives (see boundAt).
func (r drainRun) deadlineAt() time.Time { return r.startedAt("deadline") }

func (r drainRun) startedAt(field string) time.Time {
	r.s.t.Helper()
	at, err := time.Parse(time.RFC3339Nano, r.started.Str(field))
	if err != nil {
		r.s.t.Fatalf("drain started line without a %s: %v (%s)", field, err, r.started.Raw)
	}
	return at
}

// checkAtBound asserts that the drain ended at its bound, on hapsuper's
// own clock (boundAt): not before it, and no more than a poll and the
// scheduling tolerance after it.
func (r drainRun) checkAtBound() {
	r.s.t.Helper()
	bound := r.boundAt()
	if d := r.ended.At.Sub(bound); d < 0 || d > pollInterval+schedTolerance {
		r.s.t.Errorf("drain ended %s after its bound (%s after the stop signal), want at the bound", d, r.ended.At.Sub(r.term))
	}
}

// checkInBudget is how the fault tests end: hapsuper exited within limit
// (checkExitInBudget), every request started before the soft stop
// succeeded (checkServedBeforeSoftStop), and no HAProxy process is left.
func (r drainRun) checkInBudget(b budget, limit time.Duration) {
	r.s.t.Helper()
	checkExitInBudget(r.s.t, b, r.term, r.exitAt, limit)
	checkServedBeforeSoftStop(r.s.t, r.soft.At, r.cont.rec)
	checkNoHAProxyLeft(r.s.t, r.s.dir)
}

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
	// The bound ends the drain at the loop's next tick: bound is
	// hapsuper's own (drainRun.boundAt), so only its loop's scheduling
	// separates the two; a second is generous for that and still tells a
	// drain the bound did not end.
	if late := ended.At.Sub(bound); late > time.Second {
		t.Errorf("drain ended %s after the bound", late)
	}
}

// checkNotEnded asserts that the drain has not ended while a client sends.
func checkNotEnded(s *supervisor, term time.Time, why string) {
	s.t.Helper()
	if l, ok := s.Find("drain ended", nil); ok {
		s.t.Errorf("drain ended %s after SIGTERM while the client was still sending (%s: %s)%s",
			l.At.Sub(term), l.Str("reason"), l.Str("detail"), why)
	}
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
		cfg := newConfig(t)
		s := serve(t, h, cfg, fast.flags()...)
		ka := startKeepAlive(t, cfg.webAddr(), 100*time.Millisecond, 30*time.Second)
		r := s.drain(cfg.webAddr(), syscall.SIGTERM, func(*drainRun) {
			time.Sleep(1500 * time.Millisecond)
			ka.stop()
		})
		t.Log(ka.rec.summary())

		checkServedBeforeSoftStop(t, r.soft.At, r.cont.rec, ka.rec)
		last := r.cont.rec.lastStart()
		if l := ka.rec.lastStart(); l.After(last) {
			last = l
		}
		checkQuietEnd(t, r.ended, last)
		s.checkClean(r.code)
	})
}

// TestDrain_PausingClient_EndsQuietDuringPause documents the limit of a
// quiet-only drain: a client that pauses longer than the quiet period ends
// the drain during its pause. Until then the listeners accept; after the
// soft stop they refuse.
func TestDrain_PausingClient_EndsQuietDuringPause(t *testing.T) {
	eachHAProxy(t, func(t *testing.T, h haproxyVersion) {
		cfg := newConfig(t)
		s := serve(t, h, cfg, fast.flags()...)
		p := startPausing(t, cfg.webAddr(), 20*time.Millisecond, time.Second, 3*time.Second, 10*time.Second)
		time.Sleep(500 * time.Millisecond)
		term := s.signal(syscall.SIGTERM)
		var pauseStart time.Time
		for end := time.Now().Add(3 * time.Second); pauseStart.IsZero() && time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
			pauseStart, _ = p.pauseWindow()
		}
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
		s.checkClean(code)
	})
}
