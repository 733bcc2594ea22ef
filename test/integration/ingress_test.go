package integration

import (
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestIngressController_ReloadsDuringDrain plays haproxy-ingress's external
// HAProxy mode: HAProxy gets the chart's arguments (-W, its own -S with
// mode 600, -f on a directory), and a process playing the controller sends
// `reload` over that shared master socket every 300 ms, from before the stop
// request until hapsuper exits. The reloads do not cut the drain short (it
// ends quiet only after the client stops), nothing the clients sent fails,
// and the reloads that keep coming after the soft stop do not keep HAProxy
// alive past the deadline.
func TestIngressController_ReloadsDuringDrain(t *testing.T) {
	eachHAProxy(t, func(t *testing.T, h haproxyVersion) {
		dir := t.TempDir()
		cfg := newConfig(t, startBackend(t))
		cfgDir := filepath.Join(dir, "etc-haproxy")
		if err := os.Mkdir(cfgDir, 0o755); err != nil {
			t.Fatal(err)
		}
		cfg.write(t, cfgDir)
		master := filepath.Join(dir, "master.sock")
		flags := []string{"--grace-period", "12s", "--quiet-period", "1s", "--poll-interval", "100ms", "--margin", "2s"}
		s := startCommand(t, dir, nil, supervisorArgs(dir, flags,
			h.command(t, dir), "-W", "-S", master+",mode,600", "-f", cfgDir))
		s.waitReady(cfg.webAddr())

		var reloads, reloadErrors atomic.Int64
		stopController := make(chan struct{})
		controllerDone := make(chan struct{})
		go func() { // the controller: bounded by hapsuper's exit and 30 s
			defer close(controllerDone)
			tick := time.NewTicker(300 * time.Millisecond)
			defer tick.Stop()
			end := time.After(30 * time.Second)
			for {
				select {
				case <-stopController:
					return
				case <-end:
					return
				case <-tick.C:
				}
				if _, err := masterCommand(master, "reload"); err != nil {
					reloadErrors.Add(1) // the 2.6 master refuses connections while it re-execs
				} else {
					reloads.Add(1)
				}
			}
		}()
		defer func() {
			close(stopController)
			<-controllerDone
		}()

		cont := startContinuous(t, cfg.webAddr(), 20*time.Millisecond, 30*time.Second)
		time.Sleep(time.Second)
		term := s.signal(syscall.SIGTERM)
		s.waitLog("drain started", 2*time.Second)
		time.Sleep(3 * time.Second)
		if l, ok := s.Find("drain ended", nil); ok {
			t.Errorf("drain ended %s after SIGTERM while the client was still sending (%s): reloads cut it short",
				l.At.Sub(term), l.Str("reason"))
		}
		cont.stop()
		ended := s.waitLog("drain ended", 8*time.Second)
		code, exitAt := s.waitExit(15 * time.Second)
		t.Log(cont.rec.summary())
		t.Logf("%d reloads answered, %d refused while the master re-executed; drain ended %s (%s) and hapsuper exited %d %s after SIGTERM",
			reloads.Load(), reloadErrors.Load(), ended.At.Sub(term), ended.Str("reason"), code, exitAt.Sub(term))

		if reloads.Load() < 5 {
			t.Errorf("only %d reloads went through: the controller did not exercise the drain", reloads.Load())
		}
		if bad := cont.rec.failures(); len(bad) > 0 {
			t.Errorf("%d failed requests while the controller reloaded:%s", len(bad), describe(bad, 5))
		}
		// Reloads every 300 ms keep replacing workers; a worker that exits
		// between two polls restarts the quiet clock (its last counters are
		// unknown), so the drain may end later than quiet or at the bound,
		// but never before the quiet period after the last request.
		checkNotCutShort(t, ended, cont.rec.lastStart(), term.Add((12*time.Second-2*time.Second)*2/3))
		if limit := 12*time.Second - 2*time.Second + time.Second; exitAt.Sub(term) > limit {
			t.Errorf("hapsuper exited %s after SIGTERM, want within %s (deadline + 1 s) despite the reloads", exitAt.Sub(term), limit)
		}
		checkNoHAProxyLeft(t, dir)
	})
}
