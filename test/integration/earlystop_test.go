package integration

import (
	"strings"
	"syscall"
	"testing"
	"time"
)

// earlyInit starts the line the Go runtime prints (GODEBUG=inittrace=1)
// when the init of the package that catches hapsuper's signals has
// returned: from then on a stop signal is buffered, not dropped.
const earlyInit = "init github.com/hapsuper/hapsuper/supervisor/earlysignal @"

// stopBeforeStart is hapsuper's log line for a stop that came before
// HAProxy started.
const stopBeforeStart = "stop requested before HAProxy started: exiting without starting it"

// placements are where the early-stop tests run hapsuper: as a child of the
// test, and as PID 1 of a new PID namespace, where the kernel drops a
// signal that has no handler.
var placements = []struct {
	name string
	attr func() *syscall.SysProcAttr
}{
	{"child", func() *syscall.SysProcAttr { return nil }},
	{"pid1", func() *syscall.SysProcAttr { return &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID} }},
}

// TestEarlyStop_BeforeHAProxyStarts: SIGTERM sent the moment hapsuper's
// signal handler is in place, a few milliseconds after exec (while the Go
// packages still initialise, long before the settings are read): hapsuper
// exits 0 without starting HAProxy and says why, as a child and as PID 1 of
// a PID namespace. Before the handler moved into earlysignal's init, the
// same signal was dropped by the kernel (PID 1) or ended the process with
// code 2 and no log line. HAProxy answers its -vv probe 300 ms late here,
// so that a test starved by a loaded machine still signals before HAProxy
// could start.
func TestEarlyStop_BeforeHAProxyStarts(t *testing.T) {
	eachHAProxy(t, func(t *testing.T, h haproxyVersion) {
		for _, p := range placements {
			t.Run(p.name, func(t *testing.T) {
				s := startWrapped(t, h, newConfig(t), "sleep 0.3", procOptions{env: []string{"GODEBUG=inittrace=1"}, attr: p.attr()})
				l, ok := s.WaitRaw(earlyInit, 10*time.Second)
				if !ok {
					t.Fatalf("the Go runtime did not report %q within 10 s", earlyInit)
				}
				term := s.signal(syscall.SIGTERM)
				code, exitAt := s.waitExit(10 * time.Second)
				t.Logf("handler installed: %s; SIGTERM sent %s after exec, hapsuper exited %d after %s",
					strings.TrimPrefix(l.Raw, "init github.com/hapsuper/hapsuper/supervisor/"), term.Sub(s.started).Round(10*time.Microsecond), code, exitAt.Sub(term).Round(time.Millisecond))

				if code != 0 {
					t.Errorf("exit code %d, want 0 (2 is the Go runtime's default for an uncaught SIGTERM)", code)
				}
				stop, ok := s.Find(stopBeforeStart, nil)
				if !ok {
					t.Errorf("no log line %q", stopBeforeStart)
				} else if sig := stop.Str("signal"); sig != "SIGTERM" {
					t.Errorf("the log line names signal %q, want SIGTERM", sig)
				}
				if _, ok := s.Find("haproxy started", nil); ok {
					t.Error("HAProxy was started after the stop request")
				}
				checkNoHAProxyLeft(t, s.dir)
			})
		}
	})
}

// TestEarlyStop_WhileHAProxyStarts: SIGTERM right after HAProxy was
// started, before it answers (it takes 500 ms to start here): the drain
// starts at once, HAProxy comes up and serves during it, the drain ends
// quiet, exit 0, nothing left; as a child and as PID 1 of a PID namespace.
func TestEarlyStop_WhileHAProxyStarts(t *testing.T) {
	eachHAProxy(t, func(t *testing.T, h haproxyVersion) {
		for _, p := range placements {
			t.Run(p.name, func(t *testing.T) {
				cfg := newConfig(t)
				s := startWrapped(t, h, cfg, "sleep 0.5", procOptions{attr: p.attr()})
				s.waitLog("haproxy started", 10*time.Second)
				term := s.signal(syscall.SIGTERM)
				started := s.waitLog("drain started", 2*time.Second)
				ready := s.waitLog("haproxy ready", 10*time.Second)
				waitListening(t, cfg.webAddr(), 5*time.Second)
				cont := startContinuous(t, cfg.webAddr(), 20*time.Millisecond, 10*time.Second)
				time.Sleep(300 * time.Millisecond)
				sent := cont.rec.waitStartAfter(term, 5*time.Second)
				cont.stop()
				ended := s.waitLog("drain ended", 10*time.Second)
				code, exitAt := s.waitExit(10 * time.Second)
				t.Log(cont.rec.summary())
				t.Logf("SIGTERM %s after exec; drain started %s and HAProxy ready %s after it; drain ended %s (%s), exit %d %s after SIGTERM",
					term.Sub(s.started).Round(time.Millisecond), started.At.Sub(term).Round(time.Millisecond), ready.At.Sub(term).Round(time.Millisecond),
					ended.Str("reason"), ended.Str("detail"), code, exitAt.Sub(term).Round(time.Millisecond))

				if !ready.At.After(term) {
					t.Errorf("HAProxy was ready %s before SIGTERM: the test did not stop it while it started", term.Sub(ready.At))
				}
				if _, ok := s.Find(stopBeforeStart, nil); ok {
					t.Errorf("logged %q for a stop after HAProxy started", stopBeforeStart)
				}
				checkNoFailures(t, cont.rec)
				if !sent {
					t.Error("no request sent during the drain (none within 5.3 s of SIGTERM)")
				}
				if r := ended.Str("reason"); r != "quiet" {
					t.Errorf("drain reason %q, want quiet", r)
				}
				checkQuietEnd(t, ended, cont.rec.lastStart())
				s.checkClean(code)
			})
		}
	})
}
