package integration

import (
	"slices"
	"syscall"
	"testing"
	"time"
)

// TestReload_DuringDrain: a reload during the drain, asked of hapsuper
// (SIGHUP) or of the master CLI directly (`reload`, as a controller does),
// starts a new worker whose traffic still counts: the drain does not end
// while the client sends, ends quiet after it stops, and nothing fails.
func TestReload_DuringDrain(t *testing.T) {
	eachHAProxy(t, func(t *testing.T, h haproxyVersion) {
		for _, tc := range []struct {
			name   string
			reload func(t *testing.T, s *supervisor)
		}{
			{"SIGHUP", func(t *testing.T, s *supervisor) { s.signal(syscall.SIGHUP) }},
			{"MasterSocket", func(t *testing.T, s *supervisor) {
				if out, err := masterCommand(s.master, "reload"); err != nil {
					t.Fatalf("reload on the master socket: %v (%q)", err, out)
				}
			}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				dir := t.TempDir()
				cfg := newConfig(t, startBackend(t))
				s := startSupervisor(t, h, dir, cfg.write(t, dir),
					"--grace-period", "12s", "--quiet-period", "1s", "--poll-interval", "100ms", "--margin", "2s")
				s.waitReady(cfg.webAddr())

				cont := startContinuous(t, cfg.webAddr(), 20*time.Millisecond, 30*time.Second)
				time.Sleep(500 * time.Millisecond)
				term := s.signal(syscall.SIGTERM)
				s.waitLog("drain started", 2*time.Second)
				time.Sleep(time.Second)
				before := s.statusJSON().currentWorkers()
				reloadAt := time.Now()
				tc.reload(t, s)
				d, ok := s.waitStatus(5*time.Second, func(d statusDoc) bool {
					cur := d.currentWorkers()
					return len(cur) > 0 && !slices.Contains(before, cur[0])
				})
				if !ok {
					t.Fatalf("no new worker 5 s after the reload: before %v, status %+v", before, d.Workers)
				}
				time.Sleep(time.Until(reloadAt.Add(2500 * time.Millisecond)))
				if l, ok := s.Find("drain ended", nil); ok {
					t.Errorf("drain ended %s after the reload while the client was still sending (%s)", l.At.Sub(reloadAt), l.Str("reason"))
				}
				cont.stop()
				ended := s.waitLog("drain ended", 6*time.Second)
				code, exitAt := s.waitExit(10 * time.Second)
				t.Log(cont.rec.summary())
				t.Logf("workers before the reload %v, after %v; reload %s after SIGTERM; drain ended %s after SIGTERM; exit %d after %s",
					before, d.currentWorkers(), reloadAt.Sub(term), ended.At.Sub(term), code, exitAt.Sub(term))

				if tc.name == "SIGHUP" {
					if _, ok := s.Find("reload", nil); !ok {
						t.Error(`no "reload" log after SIGHUP`)
					}
				}
				if bad := cont.rec.failures(); len(bad) > 0 {
					t.Errorf("%d failed requests across the reload:%s", len(bad), describe(bad, 5))
				}
				checkQuietEnd(t, ended, cont.rec.lastStart())
				if code != 0 {
					t.Errorf("exit code %d, want 0", code)
				}
				checkNoHAProxyLeft(t, dir)
			})
		}
	})
}
