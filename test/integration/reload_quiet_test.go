package integration

import (
	"syscall"
	"testing"
	"time"
)

// TestReload_EveryTwoSecondsKeepsQuiet: a controller reloads HAProxy over
// the master CLI every 2 s, from before the stop request until hapsuper
// exits, one of them landing in the quiet period after the client's last
// request. A reload is no client traffic: its new worker starting at zero,
// the old one leaving and the master CLI refusing while the master
// re-executes must not restart the quiet period, so the drain ends on
// quiet within the quiet period + 0.5 s of the last request, and nothing
// the client sent fails.
func TestReload_EveryTwoSecondsKeepsQuiet(t *testing.T) {
	eachHAProxy(t, func(t *testing.T, h haproxyVersion) {
		b := roomy
		cfg := newConfig(t)
		s := serve(t, h, cfg, b.flags()...)
		controller := startReloadStorm(t, s, 2*time.Second, false)
		r := s.drain(cfg.webAddr(), syscall.SIGTERM, func(r *drainRun) {
			// The client stops 1.4 s after the second reload: the next
			// one comes about 0.6 s into the quiet period.
			for deadline := time.Now().Add(10 * time.Second); controller.cliOK.Load() < 2 && time.Now().Before(deadline); {
				time.Sleep(10 * time.Millisecond)
			}
			time.Sleep(1400 * time.Millisecond)
		})
		controller.stop()
		t.Log(controller)

		checkNoFailures(t, r.cont.rec)
		var last time.Time
		for _, o := range r.cont.rec.all() {
			if o.end.After(last) {
				last = o.end
			}
		}
		inQuiet := 0
		for _, e := range s.All("haproxy reloaded") {
			if e.At.After(last) && e.At.Before(r.ended.At) {
				inQuiet++
			}
		}
		t.Logf("client's last request ended %s after SIGTERM; drain ended %s after it; %d reloads answered, %d landed in between",
			last.Sub(r.term), r.ended.At.Sub(last), controller.cliOK.Load(), inQuiet)
		if inQuiet == 0 {
			t.Errorf("no reload landed between the last request and the drain's end: the scenario did not test one")
		}
		r.checkReason("quiet")
		if gap := r.ended.At.Sub(last); gap > quietPeriod+500*time.Millisecond {
			t.Errorf("drain ended %s after the last request, want within the quiet period %s + 0.5 s: a reload restarted quiet (%s)", gap, quietPeriod, r.ended.Str("detail"))
		}
		if gap := r.ended.At.Sub(r.cont.rec.lastStart()); gap < quietPeriod-pollInterval {
			t.Errorf("drain ended %s after the last request started: sooner than the quiet period", gap)
		}
		checkNoHAProxyLeft(t, s.dir)
	})
}
