package integration

import (
	"syscall"
	"testing"
	"time"
)

// TestStopSignal_SIGUSR1DrainsLikeSIGTERM: the official image's STOPSIGNAL
// (SIGUSR1) is a stop request too: drain, quiet, exit 0, nothing failed.
func TestStopSignal_SIGUSR1DrainsLikeSIGTERM(t *testing.T) {
	eachHAProxy(t, func(t *testing.T, h haproxyVersion) {
		cfg := newConfig(t)
		s := serve(t, h, cfg, fast.flags()...)
		during := false
		r := s.drain(cfg.webAddr(), syscall.SIGUSR1, func(r *drainRun) {
			time.Sleep(500 * time.Millisecond)
			during = r.cont.rec.waitStartAfter(r.term, 5*time.Second)
		})

		checkNoFailures(t, r.cont.rec)
		if !during {
			t.Error("no request sent during the drain (none within 5.5 s of the stop signal)")
		}
		checkQuietEnd(t, r.ended, r.cont.rec.lastStart())
		s.checkClean(r.code)
	})
}

// TestStopSignal_SecondSIGTERMDoesNotSkipDrain: a second SIGTERM during the
// drain is only logged; the drain still waits for its quiet period and
// hapsuper exits 0 without a hard stop.
func TestStopSignal_SecondSIGTERMDoesNotSkipDrain(t *testing.T) {
	eachHAProxy(t, func(t *testing.T, h haproxyVersion) {
		cfg := newConfig(t)
		s := serve(t, h, cfg, fast.flags()...)
		var second time.Time
		r := s.drain(cfg.webAddr(), syscall.SIGTERM, func(r *drainRun) {
			time.Sleep(500 * time.Millisecond)
			r.cont.stop()
			time.Sleep(200 * time.Millisecond)
			second = s.signal(syscall.SIGTERM)
		})
		t.Logf("second SIGTERM %s after the first", second.Sub(r.term))

		checkNoFailures(t, r.cont.rec)
		checkQuietEnd(t, r.ended, r.cont.rec.lastStart())
		if n := len(s.All("drain started")); n != 1 {
			t.Errorf("%d drains started, want 1", n)
		}
		if _, ok := s.Find("hard stop", nil); ok {
			t.Error("hapsuper hard-stopped HAProxy after a second SIGTERM")
		}
		s.checkClean(r.code)
	})
}
