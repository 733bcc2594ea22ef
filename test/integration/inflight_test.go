package integration

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hapsuper/hapsuper/test/harness"
)

// TestInFlight_SlowRequestCompletesWithConnectionClose: a 5 s request in
// flight at the soft stop completes with 200 and Connection: close, and
// hapsuper exits 0 once it has.
func TestInFlight_SlowRequestCompletesWithConnectionClose(t *testing.T) {
	eachHAProxy(t, func(t *testing.T, h haproxyVersion) {
		cfg := newConfig(t)
		s := serve(t, h, cfg, roomy.flags()...)

		slow := startSlow(t, cfg.webAddr(), 5*time.Second)
		time.Sleep(300 * time.Millisecond)
		term := s.signal(syscall.SIGTERM)
		soft := s.waitLog("soft stop", 5*time.Second)
		if !slow.wait(10 * time.Second) {
			t.Fatal("the slow request did not finish within 10 s of the soft stop")
		}
		code, exitAt := s.waitExit(10 * time.Second)
		o := slow.rec.all()[0]
		t.Log(slow.rec.summary())
		t.Logf("soft stop %s after SIGTERM; slow request ended %s after it (%v); exit %d after %s",
			soft.At.Sub(term), o.end.Sub(term), o, code, exitAt.Sub(term))

		if o.kind != harness.KindOK || o.status != 200 || !o.connClose {
			t.Errorf("in-flight request: %v, want 200 with Connection: close", o)
		}
		if !o.end.After(soft.At) {
			t.Errorf("the slow request ended before the soft stop: the test did not test it")
		}
		if exitAt.Before(o.end) {
			t.Errorf("hapsuper exited before the in-flight request finished")
		}
		s.checkClean(code)
	})
}

// TestH2_GOAWAYAndInFlightStreamsComplete: an h2c connection with two slow
// streams in flight at the soft stop gets GOAWAY, both streams complete with
// 200, and the next request does not go on that connection.
func TestH2_GOAWAYAndInFlightStreamsComplete(t *testing.T) {
	eachHAProxy(t, func(t *testing.T, h haproxyVersion) {
		cfg := newConfig(t)
		s := serve(t, h, cfg, roomy.flags()...)

		h2 := newH2Client(cfg.h2Addr())
		defer h2.close()
		if o := h2.get("/", requestTimeout); o.kind != harness.KindOK || o.conn != 1 {
			t.Fatalf("h2c request before the drain: %v", o)
		}
		streams := make(chan outcome, 2)
		for range 2 {
			go func() { streams <- h2.get("/slow?d=3s", 10*time.Second) }()
		}
		time.Sleep(300 * time.Millisecond)
		term := s.signal(syscall.SIGTERM)
		soft := s.waitLog("soft stop", 5*time.Second)
		time.Sleep(300 * time.Millisecond)
		next := h2.get("/", requestTimeout)
		var slow []outcome
		for range 2 {
			select {
			case o := <-streams:
				slow = append(slow, o)
			case <-time.After(10 * time.Second):
				t.Fatal("an in-flight h2c stream did not finish within 10 s")
			}
		}
		h2.close()
		code, exitAt := s.waitExit(10 * time.Second)
		conns := h2.connections()
		goAway := conns[0].goAwayAt()
		t.Log(h2.rec.summary())
		t.Logf("soft stop %s after SIGTERM; GOAWAY on conn 1 %s after SIGTERM; streams %v; next request %v; exit %d after %s",
			soft.At.Sub(term), goAway.Sub(term), slow, next, code, exitAt.Sub(term))

		if goAway.IsZero() {
			t.Error("conn 1 received no GOAWAY")
		} else if goAway.Before(term) {
			t.Error("conn 1 received GOAWAY before the stop request")
		}
		for _, o := range slow {
			if o.kind != harness.KindOK || o.status != 200 || o.conn != 1 || !o.end.After(soft.At) {
				t.Errorf("in-flight stream %v, want 200 on conn 1 ending after the soft stop", o)
			}
		}
		if next.conn == 1 {
			t.Errorf("request after GOAWAY went on conn 1: %v", next)
		}
		s.checkClean(code)
	})
}

// TestHardStop_HeldConnectionAtDeadline: a TCP connection that never closes
// and a 60 s request keep the soft stop from finishing; hapsuper hard-stops
// HAProxy at the deadline (grace − margin after SIGTERM) and exits before the
// grace period ends.
func TestHardStop_HeldConnectionAtDeadline(t *testing.T) {
	eachHAProxy(t, func(t *testing.T, h haproxyVersion) {
		const grace, margin = 8 * time.Second, 2 * time.Second
		deadline := grace - margin
		cfg := newConfig(t)
		s := serve(t, h, cfg, budget{grace, margin}.flags()...)

		held := holdTCP(t, cfg.tcpAddr())
		slow := startSlow(t, cfg.webAddr(), 60*time.Second)
		time.Sleep(300 * time.Millisecond)
		term := s.signal(syscall.SIGTERM)
		soft := s.waitLog("soft stop", 5*time.Second)
		code, exitAt := s.waitExit(grace)
		hard, ok := s.Find("hard stop", nil)
		if !ok {
			// Name the deviation, then check the timing on the nearest line.
			for _, l := range s.Lines() {
				if strings.HasPrefix(l.Msg, "hard stop") {
					t.Errorf(`hapsuper logged %q: the contract's message is the constant "hard stop" (details belong in fields)`, l.Msg)
					hard, ok = l, true
					break
				}
			}
		}
		if !ok {
			t.Fatal(`hapsuper exited without logging "hard stop"`)
		}
		select {
		case <-held.done:
		case <-time.After(2 * time.Second):
			t.Fatal("the held TCP connection is still open 2 s after hapsuper exited")
		}
		slow.wait(2 * time.Second)
		toExit := exitAt.Sub(term)
		t.Log(slow.rec.summary())
		t.Logf("soft stop %s, hard stop %s, exit %d at %s after SIGTERM; margin left before the grace period: %s; held connection ended at %s (%v)",
			soft.At.Sub(term), hard.At.Sub(term), code, toExit, grace-toExit, held.closed.Sub(term), held.err)

		if d := hard.At.Sub(term); d < deadline-schedTolerance || d > deadline+schedTolerance+pollInterval {
			t.Errorf("hard stop %s after SIGTERM, want at the deadline %s", d, deadline)
		}
		if toExit > deadline+time.Second {
			t.Errorf("hapsuper exited %s after SIGTERM, want ≤ grace − margin + 1s = %s", toExit, deadline+time.Second)
		}
		if held.closed.IsZero() || held.closed.Before(soft.At) {
			t.Errorf("the held connection ended at %v, before the soft stop: it did not hold", held.closed)
		}
		checkNoHAProxyLeft(t, s.dir)
	})
}
