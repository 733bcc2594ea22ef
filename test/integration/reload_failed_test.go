package integration

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Reloads that do not load. hapsuper checks its own (SIGHUP, SIGUSR2) with
// haproxy -c and does not send one that fails: the serving worker keeps
// the previous configuration, and status, metrics and the log say so. A
// reload it did not send (the master CLI's `reload`) or that HAProxy
// refuses despite a passing check (a port already bound) is reported as
// failed from show proc. Either way the worker that still serves is the
// current one (HAProxy 3.1+ lists it under old workers), and a drain after
// it, or around it, ends with a soft stop that every worker takes.

// TestReload_BrokenConfig: the configuration is broken, then reloaded by
// SIGHUP (refused: nothing sent) or by the master CLI (sent by someone
// else: failed), then the pod drains. Status shows the serving worker as
// current and the reload's result; the drain ends quiet with no request
// failed and no hard stop, and hapsuper exits 0.
func TestReload_BrokenConfig(t *testing.T) {
	eachHAProxy(t, func(t *testing.T, h haproxyVersion) {
		for _, tc := range []struct {
			name   string
			reload func(t *testing.T, s *supervisor)
			want   string // the reload's result
		}{
			{"SIGHUP", func(t *testing.T, s *supervisor) { s.signal(syscall.SIGHUP) }, "refused"},
			{"MasterCLI", func(t *testing.T, s *supervisor) {
				out, err := masterCommand(s.master, "reload")
				t.Logf("master CLI reload: %q, %v", firstLines(out, 3), err)
			}, "failed"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				cfg := newConfig(t)
				s := serve(t, h, cfg, roomy.flags()...)
				before := s.waitWorkers().currentWorkers()
				cfg.Broken = true
				cfg.write(t, s.dir)
				tc.reload(t, s)
				d := s.waitReload(tc.want)
				t.Logf("after the reload: workers %+v, reloads %+v, last %+v", d.Workers, d.Reloads, *d.Reloads.Last)
				if cur := d.currentWorkers(); len(cur) != 1 || cur[0] != before[0] || !alive(cur[0]) {
					t.Errorf("current workers %v after the %s reload, want the serving %v", cur, tc.want, before)
				}
				if tc.want == "refused" {
					if !strings.Contains(d.Reloads.Last.Detail, "this-is-not-a-keyword") {
						t.Errorf("refused reload's detail %q does not quote HAProxy's alert", d.Reloads.Last.Detail)
					}
					if e, ok := s.Find("reload refused: the new configuration does not load; HAProxy keeps serving the previous one", nil); !ok || e.Str("level") != "ERROR" {
						t.Errorf("no ERROR line says the reload was refused (found %v: %+v)", ok, e)
					}
					checkText(t, s, "refused")
				}

				r := s.drain(cfg.webAddr(), syscall.SIGTERM, func(r *drainRun) {
					time.Sleep(time.Second)
					d := s.statusJSON()
					if len(d.currentWorkers()) != 1 || d.Reloads.Last == nil || d.Reloads.Last.Result != tc.want {
						t.Errorf("while draining: workers %+v, last reload %+v; want one current worker and the %s reload", d.Workers, d.Reloads.Last, tc.want)
					}
				})
				checkNoFailures(t, r.cont.rec)
				checkQuietEnd(t, r.ended, r.cont.rec.lastStart())
				if hs := s.All("hard stop"); len(hs) > 0 {
					t.Errorf("hard stop after a %s reload: %+v", tc.want, hs)
				}
				s.checkClean(r.code)
			})
		}
	})
}

// TestReload_MissingFile: one of two -f files is removed (a ConfigMap key
// renamed), then SIGHUP. HAProxy 3.1+ would exit at such a reload: the
// check refuses it, HAProxy keeps serving, no request of a client sending
// throughout fails, and the refusal names the file.
func TestReload_MissingFile(t *testing.T) {
	eachHAProxy(t, func(t *testing.T, h haproxyVersion) {
		dir := t.TempDir()
		cfg := newConfig(t)
		main := cfg.write(t, dir)
		extra := filepath.Join(dir, "extra.cfg")
		if err := os.WriteFile(extra, []byte("\nbackend be_extra\n    server origin "+cfg.Backend+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		s := startCommand(t, dir, procOptions{}, supervisorArgs(dir, roomy.flags(), h.command(t, dir), "-f", main, "-f", extra))
		s.waitReady(cfg.webAddr())
		before := s.waitWorkers().currentWorkers()
		cont := startContinuous(t, cfg.webAddr(), 20*time.Millisecond, 20*time.Second)
		time.Sleep(300 * time.Millisecond)
		if err := os.Remove(extra); err != nil {
			t.Fatal(err)
		}
		s.signal(syscall.SIGHUP)
		d := s.waitReload("refused")
		time.Sleep(2 * time.Second)
		cont.stop()
		t.Log(cont.rec.summary())
		checkNoFailures(t, cont.rec)
		if s.Exited() {
			t.Fatalf("hapsuper exited after the reload with a missing file")
		}
		if !strings.Contains(d.Reloads.Last.Detail, "extra.cfg") {
			t.Errorf("refused reload's detail %q does not name the missing file", d.Reloads.Last.Detail)
		}
		if cur := s.statusJSON().currentWorkers(); len(cur) != 1 || cur[0] != before[0] {
			t.Errorf("current workers %v after the refused reload, want %v", cur, before)
		}
		s.stopClean()
	})
}

// TestReload_FailingAroundTheBound: a client that never pauses keeps the
// drain to its bound; from 150 ms before the bound to 150 ms after it the
// master gets a SIGUSR2 every 25 ms for a configuration that does not
// load, as a controller's reloads would come (hapsuper's own would be
// refused by the check). A master of any version drops a SIGUSR1 that
// follows a SIGUSR2 by a few ms and refuses polls while it re-executes (3.2
// also while its new worker loads): the soft stop must still be taken by every worker, with no hard
// stop, no request started before it failed, and exit 0.
func TestReload_FailingAroundTheBound(t *testing.T) {
	eachHAProxy(t, func(t *testing.T, h haproxyVersion) {
		b := budget{grace: 20 * time.Second, margin: 2 * time.Second} // bound 12 s, deadline 18 s
		cfg := newConfig(t)
		s := serve(t, h, cfg, b.flags()...)
		master := s.waitWorkers().MasterPid
		cfg.Broken = true
		cfg.write(t, s.dir)
		sent := 0
		r := s.drain(cfg.webAddr(), syscall.SIGTERM, func(r *drainRun) {
			start := r.term.Add(b.bound() - 150*time.Millisecond)
			time.Sleep(time.Until(start))
			for time.Since(start) < 300*time.Millisecond {
				if syscall.Kill(master, syscall.SIGUSR2) == nil {
					sent++
				}
				time.Sleep(25 * time.Millisecond)
			}
		})
		t.Logf("%d SIGUSR2 sent around the bound; %d reloads failed; soft stop resent %d times (worker not stopping) and %d times (master CLI not answering)",
			sent, len(s.All("reload failed: HAProxy keeps serving the previous configuration")),
			len(s.All("soft stop not taken by a worker: sending it again")), len(s.All("soft stop not confirmed: the master CLI does not answer; sending it again")))
		if sent < 5 {
			t.Errorf("only %d reloads sent around the bound", sent)
		}
		if reason := r.ended.Str("reason"); reason != "bound" && reason != "unavailable" {
			t.Errorf("drain ended %q (%s), want at the bound: bound, or unavailable when the master re-executing refused the last polls", reason, r.ended.Str("detail"))
		}
		if hs := s.All("hard stop"); len(hs) > 0 {
			t.Errorf("hard stop after reloads around the bound: %+v", hs)
		}
		if r.code != 0 {
			t.Errorf("exit code %d, want 0", r.code)
		}
		r.checkInBudget(b, b.deadline())
	})
}

// waitReload waits, at most 10 s, for status to show the last reload
// ended with result, and returns the document.
func (s *supervisor) waitReload(result string) statusDoc {
	s.t.Helper()
	d, ok := s.waitStatus(10*time.Second, func(d statusDoc) bool {
		return d.Reloads.Last != nil && d.Reloads.Last.Result != "checking" && d.Reloads.Last.Result != "reloading"
	})
	if !ok || d.Reloads.Last.Result != result {
		s.t.Fatalf("last reload %+v (reloads %+v), want %s", d.Reloads.Last, d.Reloads, result)
	}
	return d
}

// firstLines returns the first n lines of s.
func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, " | ")
}

// TestReload_PortTaken: a reload whose configuration parses but cannot
// bind (a new frontend on a port another process holds) passes haproxy -c
// and is sent; HAProxy refuses it, and hapsuper reports it failed, with
// the worker that still serves as current, which serves a new client
// without a failure. What a client sending meanwhile sees is HAProxy's own
// doing and is only logged: on every version the new process pauses the
// serving worker's listeners while it retries the bind (about 2 s), and
// connections are refused until it gives up.
func TestReload_PortTaken(t *testing.T) {
	eachHAProxy(t, func(t *testing.T, h haproxyVersion) {
		cfg := newConfig(t)
		s := serve(t, h, cfg, roomy.flags()...)
		before := s.waitWorkers().currentWorkers()
		taken, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer taken.Close()
		cfg.Probe = taken.Addr().(*net.TCPAddr).Port
		cfg.write(t, s.dir)
		cont := startContinuous(t, cfg.webAddr(), 20*time.Millisecond, 20*time.Second)
		time.Sleep(300 * time.Millisecond)
		s.signal(syscall.SIGHUP)
		d := s.waitReload("failed")
		cont.stop()
		t.Logf("HAProxy %s, during a reload that cannot bind: %s", h.name, cont.rec.summary())
		waitListening(t, cfg.webAddr(), 5*time.Second) // the serving worker resumes its listeners
		after := startContinuous(t, cfg.webAddr(), 20*time.Millisecond, 20*time.Second)
		time.Sleep(time.Second)
		after.stop()
		checkNoFailures(t, after.rec)
		if cur := d.currentWorkers(); len(cur) != 1 || cur[0] != before[0] || !alive(cur[0]) {
			t.Errorf("current workers %v after the failed reload, want the serving %v", cur, before)
		}
		if e, ok := s.Find("reload failed: HAProxy keeps serving the previous configuration", nil); !ok || e.Str("level") != "ERROR" {
			t.Errorf("no ERROR line says the reload failed (found %v: %+v)", ok, e)
		}
		s.stopClean()
	})
}
