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
				cfg := newConfig(t)
				s := serve(t, h, cfg, roomy.flags()...)
				r := s.drain(cfg.webAddr(), syscall.SIGTERM, func(r *drainRun) {
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
					t.Logf("workers before the reload %v, after %v; reload %s after SIGTERM", before, d.currentWorkers(), reloadAt.Sub(r.term))
					time.Sleep(time.Until(reloadAt.Add(2500 * time.Millisecond)))
					checkNotEnded(s, r.term, "")
				})

				if tc.name == "SIGHUP" {
					if _, ok := s.Find("reload", nil); !ok {
						t.Error(`no "reload" log after SIGHUP`)
					}
				}
				checkNoFailures(t, r.cont.rec)
				checkQuietEnd(t, r.ended, r.cont.rec.lastStart())
				s.checkClean(r.code)
			})
		}
	})
}
