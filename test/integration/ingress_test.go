package integration

import (
	"os"
	"path/filepath"
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
		b := roomy
		dir := t.TempDir()
		cfg := newConfig(t)
		cfgDir := filepath.Join(dir, "etc-haproxy")
		if err := os.Mkdir(cfgDir, 0o755); err != nil {
			t.Fatal(err)
		}
		cfg.write(t, cfgDir)
		s := startCommand(t, dir, procOptions{}, supervisorArgs(dir, b.flags(),
			h.command(t, dir), "-W", "-S", filepath.Join(dir, "master.sock")+",mode,600", "-f", cfgDir))
		s.waitReady(cfg.webAddr())
		controller := startReloadStorm(t, s, 300*time.Millisecond, false) // on the shared master socket
		time.Sleep(500 * time.Millisecond)
		r := s.drain(cfg.webAddr(), syscall.SIGTERM, func(r *drainRun) {
			time.Sleep(3 * time.Second)
			checkNotEnded(s, r.term, ": reloads cut it short")
		})
		t.Log(controller)

		if controller.cliOK.Load() < 5 {
			t.Errorf("only %d reloads went through: the controller did not exercise the drain", controller.cliOK.Load())
		}
		checkNoFailures(t, r.cont.rec)
		// Reloads every 300 ms keep replacing workers; a worker that exits
		// between two polls restarts the quiet clock (its last counters are
		// unknown), so the drain may end later than quiet or at the bound,
		// but never before the quiet period after the last request.
		checkNotCutShort(t, r.ended, r.cont.rec.lastStart(), r.term.Add(b.bound()))
		if limit := b.deadline() + time.Second; r.exitAt.Sub(r.term) > limit {
			t.Errorf("hapsuper exited %s after SIGTERM, want within %s (deadline + 1 s) despite the reloads", r.exitAt.Sub(r.term), limit)
		}
		checkNoHAProxyLeft(t, dir)
	})
}
