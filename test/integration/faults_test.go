package integration

// The fault matrix: each test breaks one thing hapsuper depends on while a
// drain runs (the master hangs, a worker never finishes, reloads storm, the
// master CLI goes away or lies, the status socket is flooded) and asserts
// the two promises that must hold whatever breaks: hapsuper exits inside the
// shutdown budget (supervisor.go's package comment), and nothing served
// before the soft stop failed. Each test then pins what hapsuper does in
// that case.

import (
	"io"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hapsuper/hapsuper/test/harness"
)

// budget is the shutdown budget of supervisor/supervisor.go for one grace
// period and margin, measured from the stop request.
type budget struct{ grace, margin time.Duration }

// faultBudget is what the fault tests run with: deadline 8 s, bound 5.33 s,
// SIGKILL of the process group at 9 s.
var faultBudget = budget{grace: 10 * time.Second, margin: 2 * time.Second}

// flags are hapsuper's flags for the budget, with the suite's fast quiet
// period and polls.
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

// checkExitInBudget asserts that hapsuper exited no later than limit after
// the stop request, and before the grace period ends in any case.
func checkExitInBudget(t *testing.T, b budget, term, exitAt time.Time, limit time.Duration) {
	t.Helper()
	toExit := exitAt.Sub(term)
	t.Logf("exit %s after SIGTERM: limit %s, %s before the grace period %s ends", toExit, limit, b.grace-toExit, b.grace)
	if toExit > limit {
		t.Errorf("hapsuper exited %s after SIGTERM, want ≤ %s", toExit, limit)
	}
	if toExit >= b.grace {
		t.Errorf("hapsuper exited %s after SIGTERM: after the grace period %s, where the kubelet's SIGKILL comes", toExit, b.grace)
	}
}

// checkCleanEnd is how the fault tests end: hapsuper exited within limit
// (checkExitInBudget), every request rec started before the soft stop
// succeeded (checkServedBeforeSoftStop), and no HAProxy process of dir is
// left (checkNoHAProxyLeft).
func checkCleanEnd(t *testing.T, b budget, dir string, term, exitAt time.Time, limit time.Duration, soft time.Time, rec *recorder) {
	t.Helper()
	checkExitInBudget(t, b, term, exitAt, limit)
	checkServedBeforeSoftStop(t, soft, rec)
	checkNoHAProxyLeft(t, dir)
}

// checkServedBeforeSoftStop asserts that every request the clients started
// before the soft stop succeeded, and that they started enough of them to
// mean something.
func checkServedBeforeSoftStop(t *testing.T, soft time.Time, recs ...*recorder) {
	t.Helper()
	for _, r := range recs {
		before := r.where(func(o outcome) bool { return o.start.Before(soft) })
		if len(before) < 10 {
			t.Errorf("%s: only %d requests before the soft stop: too few to mean anything", r.summary(), len(before))
		}
		if bad := r.where(func(o outcome) bool { return o.start.Before(soft) && o.kind != harness.KindOK }); len(bad) > 0 {
			t.Errorf("%s: %d requests started before the soft stop failed:%s", r.name, len(bad), describe(bad, 5))
		}
	}
}

// TestFault_MasterHungDuringDrain: the master is stopped (SIGSTOP) during
// the drain. Its CLI accepts connections but answers nothing, so every poll
// times out: the drain ends at the bound with reason unavailable. The soft
// stop and the hard stop (signals to a stopped process) stay pending; one
// killAfter after the deadline hapsuper SIGKILLs the process group, and
// exits with the master's 128+9 before the grace period ends. The worker
// served on meanwhile: nothing before the soft stop failed.
func TestFault_MasterHungDuringDrain(t *testing.T) {
	eachHAProxy(t, func(t *testing.T, h haproxyVersion) {
		b := faultBudget
		dir := t.TempDir()
		cfg := newConfig(t, startBackend(t))
		s := startSupervisor(t, h, dir, cfg.write(t, dir), b.flags()...)
		s.waitReady(cfg.webAddr())
		master := s.waitWorkers().MasterPid

		cont := startContinuous(t, cfg.webAddr(), 20*time.Millisecond, 30*time.Second)
		time.Sleep(500 * time.Millisecond)
		term := s.signal(syscall.SIGTERM)
		s.waitLog("drain started", 2*time.Second)
		time.Sleep(300 * time.Millisecond)
		stopAt := time.Now()
		if err := syscall.Kill(master, syscall.SIGSTOP); err != nil {
			t.Fatalf("SIGSTOP the master %d: %v", master, err)
		}
		ended := s.waitLog("drain ended", b.bound()+2*time.Second)
		soft := s.waitLog("soft stop", time.Second)
		code, exitAt := s.waitExit(b.grace)
		cont.stop()
		hard, hardOK := s.Find("hard stop", nil)
		kill, killOK := s.Find("haproxy did not exit after the hard stop: killing its process group", nil)
		t.Log(cont.rec.summary())
		t.Logf("master %d stopped %s after SIGTERM; drain ended %s (%s: %s); hard stop %s; group killed %s; exit %d",
			master, stopAt.Sub(term), ended.At.Sub(term), ended.Str("reason"), ended.Str("detail"),
			hard.At.Sub(term), kill.At.Sub(term), code)

		if r := ended.Str("reason"); r != "unavailable" {
			t.Errorf("drain ended with reason %q, want unavailable (the master answered no poll)", r)
		}
		if d := ended.At.Sub(term); d < b.bound()-pollInterval || d > b.bound()+pollInterval+schedTolerance {
			t.Errorf("drain ended %s after SIGTERM, want at the bound %s", d, b.bound())
		}
		if !hardOK {
			t.Error(`no "hard stop" at the deadline`)
		} else if d := hard.At.Sub(term); d < b.deadline()-pollInterval || d > b.deadline()+pollInterval+schedTolerance {
			t.Errorf("hard stop %s after SIGTERM, want at the deadline %s", d, b.deadline())
		}
		if !killOK {
			t.Error("no SIGKILL of the process group after the ignored hard stop")
		} else if d := kill.At.Sub(hard.At); d < b.killAfter() || d > b.killAfter()+pollInterval+schedTolerance {
			t.Errorf("process group killed %s after the hard stop, want %s", d, b.killAfter())
		}
		if code != 128+int(syscall.SIGKILL) {
			t.Errorf("exit code %d, want %d (the master was SIGKILLed)", code, 128+int(syscall.SIGKILL))
		}
		// The SIGKILL is due at deadline + killAfter; the exit comes a reap later.
		checkCleanEnd(t, b, dir, term, exitAt, b.exitLimit()+pollInterval+schedTolerance, soft.At, cont.rec)
	})
}

// TestFault_IdleH2ConnectionWithoutClientFin: without `timeout client-fin`
// an HTTP/2 connection without streams outlives the soft stop (it gets
// GOAWAY and stays until the client closes it, which this one never does).
// hapsuper warns about the config, ends the drain quiet, hard-stops HAProxy
// at the deadline, which ends the connection, and exits before the SIGKILL
// would be due.
func TestFault_IdleH2ConnectionWithoutClientFin(t *testing.T) {
	eachHAProxy(t, func(t *testing.T, h haproxyVersion) {
		b := faultBudget
		dir := t.TempDir()
		cfg := newConfig(t, startBackend(t))
		cfg.ClientFin = false
		s := startSupervisor(t, h, dir, cfg.write(t, dir), b.flags()...)
		s.waitReady(cfg.h2Addr())

		idle := holdIdleH2(t, cfg.h2Addr())
		cont := startContinuous(t, cfg.webAddr(), 20*time.Millisecond, 30*time.Second)
		time.Sleep(500 * time.Millisecond)
		term := s.signal(syscall.SIGTERM)
		s.waitLog("drain started", 2*time.Second)
		time.Sleep(time.Second)
		cont.stop()
		ended := s.waitLog("drain ended", 5*time.Second)
		soft := s.waitLog("soft stop", time.Second)
		code, exitAt := s.waitExit(b.grace)
		hard, hardOK := s.Find("hard stop", nil)
		select {
		case <-idle.done:
		case <-time.After(2 * time.Second):
			t.Fatal("the idle h2 connection is still open 2 s after hapsuper exited")
		}
		goAway := idle.conn.goAwayAt()
		t.Log(cont.rec.summary())
		t.Logf("drain ended %s after SIGTERM (%s); soft stop %s; GOAWAY %s; hard stop %s; idle h2 connection ended %s (%v); exit %d",
			ended.At.Sub(term), ended.Str("reason"), soft.At.Sub(term), goAway.Sub(term), hard.At.Sub(term),
			idle.closed.Sub(term), idle.err, code)

		if !warned(s, "client-fin") {
			t.Error("no config warning about the missing timeout client-fin")
		}
		checkQuietEnd(t, ended, cont.rec.lastStart())
		if goAway.IsZero() || goAway.Before(soft.At) {
			t.Errorf("the idle h2 connection got GOAWAY at %v, want after the soft stop", goAway)
		}
		if !hardOK {
			t.Error(`no "hard stop": the soft stop should not have finished with the idle h2 connection open`)
		} else if d := hard.At.Sub(term); d < b.deadline()-pollInterval || d > b.deadline()+pollInterval+schedTolerance {
			t.Errorf("hard stop %s after SIGTERM, want at the deadline %s", d, b.deadline())
		}
		if idle.closed.Before(hard.At) {
			t.Errorf("the idle h2 connection ended %s before the hard stop: it did not hold the worker", hard.At.Sub(idle.closed))
		}
		if code != 0 {
			t.Errorf("exit code %d, want the master's 0 after a hard stop", code)
		}
		checkCleanEnd(t, b, dir, term, exitAt, b.exitLimit(), soft.At, cont.rec)
	})
}

// warned reports whether hapsuper logged a config warning mentioning s.
func warned(s *supervisor, sub string) bool {
	for _, l := range s.Lines() {
		if l.Msg == "config warning" && strings.Contains(l.Str("warning"), sub) {
			return true
		}
	}
	return false
}

// idleH2 is an HTTP/2 connection (prior knowledge) that sent the preface and
// its SETTINGS and then nothing: no stream, no close.
type idleH2 struct {
	conn   *h2Conn // notes the server's GOAWAY
	done   chan struct{}
	closed time.Time
	err    error // what the read that saw the end returned
}

// holdIdleH2 opens the connection and reads until the server ends it (the
// test's end closes it too).
func holdIdleH2(t *testing.T, addr string) *idleH2 {
	t.Helper()
	raw, err := net.DialTimeout("tcp", addr, requestTimeout)
	if err != nil {
		t.Fatalf("open an idle h2 connection to %s: %v", addr, err)
	}
	const preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
	emptySettings := []byte{0, 0, 0, 0x4, 0, 0, 0, 0, 0}
	if _, err := raw.Write(append([]byte(preface), emptySettings...)); err != nil {
		t.Fatalf("send the h2 preface to %s: %v", addr, err)
	}
	i := &idleH2{conn: &h2Conn{Conn: raw, id: 1}, done: make(chan struct{})}
	go func() {
		defer close(i.done)
		_, i.err = io.Copy(io.Discard, i.conn)
		i.closed = time.Now()
	}()
	// Acknowledge the server's SETTINGS, as a well-behaved idle client does;
	// the server sends them with its preface, at once.
	time.Sleep(100 * time.Millisecond)
	settingsAck := []byte{0, 0, 0, 0x4, 0x1, 0, 0, 0, 0}
	if _, err := raw.Write(settingsAck); err != nil {
		t.Fatalf("acknowledge the server's SETTINGS on %s: %v", addr, err)
	}
	t.Cleanup(func() { raw.Close(); <-i.done })
	return i
}
