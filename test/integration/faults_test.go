package integration

// The fault matrix: each test breaks one thing hapsuper depends on while a
// drain runs (the master hangs, a worker never finishes, reloads storm, the
// master CLI goes away or lies, the status socket is flooded) and asserts
// the two promises that must hold whatever breaks: hapsuper exits inside the
// shutdown budget (supervisor.go's package comment), and nothing served
// before the soft stop failed. Each test then pins what hapsuper does in
// that case.

import (
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/hapsuper/hapsuper/test/harness"
)

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
		if bad := r.where(func(o outcome) bool { return o.start.Before(soft.Add(-softStopInFlight)) && o.kind != harness.KindOK }); len(bad) > 0 {
			t.Errorf("%s: %d requests started before the soft stop failed:%s", r.name, len(bad), describe(bad, 5))
		}
		if late := r.where(func(o outcome) bool {
			return !o.start.Before(soft.Add(-softStopInFlight)) && o.start.Before(soft) && o.kind != harness.KindOK
		}); len(late) > 0 {
			t.Logf("%s: %d request(s) started within %s before the soft stop met the closed listener:%s", r.name, len(late), softStopInFlight, describe(late, 5))
		}
	}
}

// softStopInFlight is how long before the "soft stop" line a client may
// start a request that still meets the listener the soft stop closes: the
// line comes just before the signal, and a connect started a moment
// earlier can reach the socket after it (seen: 1.6 ms on a loaded
// machine). These drains end while the client still sends, so such a
// refusal is the soft stop's, not the drain's.
const softStopInFlight = 100 * time.Millisecond

// TestFault_MasterHungDuringDrain: the master is stopped (SIGSTOP) during
// the drain. Its CLI accepts connections but answers nothing, so every poll
// times out: the drain ends at the bound with reason unavailable. The soft
// stop and the hard stop (signals to a stopped process) stay pending; one
// killAfter after the deadline hapsuper SIGKILLs the process group, and
// exits with the master's 128+9 before the grace period ends. The worker
// served on meanwhile: nothing before the soft stop failed.
func TestFault_MasterHungDuringDrain(t *testing.T) {
	eachHAProxy(t, func(t *testing.T, h haproxyVersion) {
		b := fast
		cfg := newConfig(t)
		s := serve(t, h, cfg, b.flags()...)
		master := s.waitWorkers().MasterPid
		r := s.drain(cfg.webAddr(), syscall.SIGTERM, func(r *drainRun) {
			time.Sleep(300 * time.Millisecond)
			if err := syscall.Kill(master, syscall.SIGSTOP); err != nil {
				t.Fatalf("SIGSTOP the master %d: %v", master, err)
			}
			t.Logf("master %d stopped %s after SIGTERM", master, time.Since(r.term))
			s.waitLog("drain ended", b.bound()+2*time.Second) // the client sends until then
		})
		hard, hardOK := s.Find("hard stop", nil)
		kill, killOK := s.Find("haproxy did not exit after the hard stop: killing its process group", nil)
		t.Logf("hard stop %s; group killed %s", hard.At.Sub(r.term), kill.At.Sub(r.term))

		r.checkReason("unavailable")
		r.checkAtBound()
		if !hardOK {
			t.Error(`no "hard stop" at the deadline`)
		} else if d := hard.At.Sub(r.deadlineAt()); d < 0 || d > pollInterval+schedTolerance {
			t.Errorf("hard stop %s after its deadline (%s after SIGTERM), want at the deadline", d, hard.At.Sub(r.term))
		}
		if !killOK {
			t.Error("no SIGKILL of the process group after the ignored hard stop")
		} else if d := kill.At.Sub(hard.At); d < b.killAfter()-logLag || d > b.killAfter()+pollInterval+schedTolerance {
			t.Errorf("process group killed %s after the hard stop, want %s", d, b.killAfter())
		}
		if r.code != 128+int(syscall.SIGKILL) {
			t.Errorf("exit code %d, want %d (the master was SIGKILLed)", r.code, 128+int(syscall.SIGKILL))
		}
		// The SIGKILL is due at deadline + killAfter; the exit comes a reap later.
		r.checkInBudget(b, b.exitLimit()+pollInterval+schedTolerance)
	})
}

// logLag bounds how much later than the instant it reports a log line is
// stamped: the kill is timed from the hard stop's instant, the "hard stop"
// line is written after it (999.98 ms between the two lines was seen on a
// loaded machine).
const logLag = 5 * time.Millisecond

// TestFault_IdleH2ConnectionWithoutClientFin: without `timeout client-fin`
// an HTTP/2 connection without streams outlives the soft stop (it gets
// GOAWAY and stays until the client closes it, which this one never does).
// hapsuper warns about the config, ends the drain quiet, hard-stops HAProxy
// at the deadline, which ends the connection, and exits before the SIGKILL
// would be due.
func TestFault_IdleH2ConnectionWithoutClientFin(t *testing.T) {
	eachHAProxy(t, func(t *testing.T, h haproxyVersion) {
		b := fast
		cfg := newConfig(t)
		cfg.ClientFin = false
		s := serve(t, h, cfg, b.flags()...)
		idle := holdIdleH2(t, cfg.h2Addr())
		r := s.drain(cfg.webAddr(), syscall.SIGTERM, func(*drainRun) { time.Sleep(time.Second) })
		hard, hardOK := s.Find("hard stop", nil)
		select {
		case <-idle.done:
		case <-time.After(2 * time.Second):
			t.Fatal("the idle h2 connection is still open 2 s after hapsuper exited")
		}
		goAway := idle.Conn.(*h2Conn).goAwayAt()
		t.Logf("GOAWAY %s; hard stop %s; idle h2 connection ended %s (%v) after SIGTERM",
			goAway.Sub(r.term), hard.At.Sub(r.term), idle.closed.Sub(r.term), idle.err)

		if len(s.warnings("client-fin")) == 0 {
			t.Error("no config warning about the missing timeout client-fin")
		}
		checkQuietEnd(t, r.ended, r.cont.rec.lastStart())
		if goAway.IsZero() || goAway.Before(r.soft.At) {
			t.Errorf("the idle h2 connection got GOAWAY at %v, want after the soft stop", goAway)
		}
		if !hardOK {
			t.Error(`no "hard stop": the soft stop should not have finished with the idle h2 connection open`)
		} else if d := hard.At.Sub(r.deadlineAt()); d < 0 || d > pollInterval+schedTolerance {
			t.Errorf("hard stop %s after its deadline (%s after SIGTERM), want at the deadline", d, hard.At.Sub(r.term))
		}
		if idle.closed.Before(hard.At) {
			t.Errorf("the idle h2 connection ended %s before the hard stop: it did not hold the worker", hard.At.Sub(idle.closed))
		}
		if r.code != 0 {
			t.Errorf("exit code %d, want the master's 0 after a hard stop", r.code)
		}
		r.checkInBudget(b, b.exitLimit())
	})
}

// holdIdleH2 opens an HTTP/2 connection (prior knowledge) to addr that
// sends the preface and its SETTINGS and then nothing: no stream, no close.
// It reads until the server ends it (the test's end closes it too); its
// h2Conn notes the server's GOAWAY.
func holdIdleH2(t *testing.T, addr string) *heldConn {
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
	held := hold(t, &h2Conn{Conn: raw, id: 1})
	// Acknowledge the server's SETTINGS, as a well-behaved idle client does;
	// the server sends them with its preface, at once.
	time.Sleep(100 * time.Millisecond)
	settingsAck := []byte{0, 0, 0, 0x4, 0x1, 0, 0, 0, 0}
	if _, err := raw.Write(settingsAck); err != nil {
		t.Fatalf("acknowledge the server's SETTINGS on %s: %v", addr, err)
	}
	return held
}
