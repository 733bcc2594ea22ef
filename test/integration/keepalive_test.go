package integration

import (
	"syscall"
	"testing"
	"time"

	"github.com/hapsuper/hapsuper/test/harness"
)

// TestKeepAlive_IdleCloseOnResponse_NoErrorsAcrossSoftStop: a keep-alive
// client sending every 200 ms never lets the drain go quiet, so the drain
// ends at max wait (2/3 of grace − margin); with idle-close-on-response its
// connection then gets Connection: close on its next reply instead of being
// cut, and the only failures it may see are refused NEW connections after
// the soft stop closed the listener.
func TestKeepAlive_IdleCloseOnResponse_NoErrorsAcrossSoftStop(t *testing.T) {
	eachHAProxy(t, func(t *testing.T, h haproxyVersion) {
		const grace, margin = 9 * time.Second, 2 * time.Second
		maxWait := (grace - margin) * 2 / 3
		cfg := newConfig(t)
		s := serve(t, h, cfg, budget{grace, margin}.flags()...)

		ka := startKeepAlive(t, cfg.webAddr(), 200*time.Millisecond, 20*time.Second)
		time.Sleep(600 * time.Millisecond)
		term := s.signal(syscall.SIGTERM)
		ended := s.waitLog("drain ended", maxWait+3*time.Second)
		soft := s.waitLog("soft stop", 2*time.Second)
		code, exitAt := s.waitExit(grace)
		ka.stop()
		refusedAfter := ka.rec.where(func(o outcome) bool { return o.kind == harness.KindRefused && o.start.After(soft.At) })
		t.Log(ka.rec.summary())
		t.Logf("drain ended %s after SIGTERM (%s, max wait %s); soft stop %s; exit %d after %s; %d refused new connections after the soft stop",
			ended.At.Sub(term), ended.Str("reason"), maxWait, soft.At.Sub(term), code, exitAt.Sub(term), len(refusedAfter))

		if w := s.warnings("idle-close-on-response"); len(w) > 0 {
			t.Errorf("config warnings about idle-close-on-response although it is set: %q", w)
		}
		if r := ended.Str("reason"); r != "bound" {
			t.Errorf("drain ended with reason %q under a client sending every 200 ms, want bound", r)
		}
		if d := ended.At.Sub(term); d < maxWait-pollInterval || d > maxWait+2*pollInterval+schedTolerance {
			t.Errorf("drain ended %s after SIGTERM, want max wait %s (2/3 of grace − margin)", d, maxWait)
		}
		if bad := ka.rec.where(func(o outcome) bool {
			return o.kind != harness.KindOK && !(o.kind == harness.KindRefused && o.start.After(soft.At))
		}); len(bad) > 0 {
			t.Errorf("%d keep-alive requests failed (other than a refused new connection after the soft stop):%s", len(bad), describe(bad, 10))
		}
		closed := ka.rec.where(func(o outcome) bool {
			return o.kind == harness.KindOK && o.connClose && o.reused && o.end.After(soft.At)
		})
		if len(closed) == 0 {
			t.Error("no reply with Connection: close on the reused connection after the soft stop")
		}
		s.checkClean(code)
	})
}

// TestKeepAlive_WithoutIdleCloseOnResponse_Warns: a config without the
// option gets a "config warning" at start naming it.
func TestKeepAlive_WithoutIdleCloseOnResponse_Warns(t *testing.T) {
	eachHAProxy(t, func(t *testing.T, h haproxyVersion) {
		cfg := newConfig(t)
		cfg.IdleClose = false
		s := serve(t, h, cfg, fast.flags()...)

		t.Logf("config warnings: %q", s.warnings(""))
		if len(s.warnings("idle-close-on-response")) == 0 {
			t.Error("no config warning mentioning idle-close-on-response")
		}
		s.stopClean()
	})
}
