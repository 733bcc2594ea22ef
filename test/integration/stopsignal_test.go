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
		dir := t.TempDir()
		cfg := newConfig(t, startBackend(t))
		s := startSupervisor(t, h, dir, cfg.write(t, dir), fastFlags...)
		s.waitReady(cfg.webAddr())

		cont := startContinuous(t, cfg.webAddr(), 20*time.Millisecond, 30*time.Second)
		time.Sleep(500 * time.Millisecond)
		sig := s.signal(syscall.SIGUSR1)
		s.waitLog("drain started", 2*time.Second)
		time.Sleep(500 * time.Millisecond)
		cont.stop()
		ended := s.waitLog("drain ended", 10*time.Second)
		code, exitAt := s.waitExit(10 * time.Second)
		t.Log(cont.rec.summary())
		t.Logf("drain ended %s after SIGUSR1, exit %d after %s", ended.At.Sub(sig), code, exitAt.Sub(sig))

		if bad := cont.rec.failures(); len(bad) > 0 {
			t.Errorf("%d failed requests:%s", len(bad), describe(bad, 5))
		}
		if !cont.rec.lastStart().After(sig) {
			t.Error("no request sent during the drain")
		}
		checkQuietEnd(t, ended, cont.rec.lastStart())
		if code != 0 {
			t.Errorf("exit code %d, want 0", code)
		}
		checkNoHAProxyLeft(t, dir)
	})
}

// TestStopSignal_SecondSIGTERMDoesNotSkipDrain: a second SIGTERM during the
// drain is only logged; the drain still waits for its quiet period and
// hapsuper exits 0 without a hard stop.
func TestStopSignal_SecondSIGTERMDoesNotSkipDrain(t *testing.T) {
	eachHAProxy(t, func(t *testing.T, h haproxyVersion) {
		dir := t.TempDir()
		cfg := newConfig(t, startBackend(t))
		s := startSupervisor(t, h, dir, cfg.write(t, dir), fastFlags...)
		s.waitReady(cfg.webAddr())

		cont := startContinuous(t, cfg.webAddr(), 20*time.Millisecond, 30*time.Second)
		time.Sleep(500 * time.Millisecond)
		first := s.signal(syscall.SIGTERM)
		s.waitLog("drain started", 2*time.Second)
		time.Sleep(500 * time.Millisecond)
		cont.stop()
		time.Sleep(200 * time.Millisecond)
		second := s.signal(syscall.SIGTERM)
		ended := s.waitLog("drain ended", 10*time.Second)
		code, exitAt := s.waitExit(10 * time.Second)
		t.Log(cont.rec.summary())
		t.Logf("second SIGTERM %s after the first; drain ended %s after the second; exit %d after %s",
			second.Sub(first), ended.At.Sub(second), code, exitAt.Sub(first))

		if bad := cont.rec.failures(); len(bad) > 0 {
			t.Errorf("%d failed requests:%s", len(bad), describe(bad, 5))
		}
		checkQuietEnd(t, ended, cont.rec.lastStart())
		if n := len(s.All("drain started")); n != 1 {
			t.Errorf("%d drains started, want 1", n)
		}
		if _, ok := s.Find("hard stop", nil); ok {
			t.Error("hapsuper hard-stopped HAProxy after a second SIGTERM")
		}
		if code != 0 {
			t.Errorf("exit code %d, want 0", code)
		}
		checkNoHAProxyLeft(t, dir)
	})
}
