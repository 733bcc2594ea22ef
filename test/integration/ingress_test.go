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
// ends only after the client stops, quiet or at the bound), nothing the
// clients sent fails, and the drain never ends `unavailable`: HAProxy
// served and reloaded throughout, and a master CLI that refuses while the
// master re-executes (for seconds at a time on a loaded machine) is HAProxy
// reloading. The reloads that keep coming after the soft stop do not keep
// HAProxy alive: each new worker is stopped again, the master exits by
// itself (hapsuper never SIGKILLs its process group), and hapsuper exits
// before the kubelet's SIGKILL at the grace period.
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
		t.Logf("%d workers of reloads after the soft stop stopped again; %d hard stop",
			len(s.All("reload after the soft stop: a new worker listens again; soft stop sent again"))+
				len(s.All("reload after the hard stop: a new worker listens again; hard stop sent again")), len(s.All("hard stop")))

		if controller.cliOK.Load() < 5 {
			t.Errorf("only %d reloads went through: the controller did not exercise the drain", controller.cliOK.Load())
		}
		checkNoFailures(t, r.cont.rec)
		// Reloads every 300 ms keep replacing workers; a poll the
		// re-executing master refuses restarts the quiet clock when the
		// readings around it cannot account for a worker that left (no
		// stop line in time, sessions it had), so the drain may end later
		// than quiet or at the bound, but never before the quiet period
		// after the last request.
		checkNotCutShort(t, r.ended, r.cont.rec.lastStart(), r.boundAt())
		if reason := r.ended.Str("reason"); reason == "unavailable" {
			t.Errorf("drain ended unavailable (%s) while HAProxy served and reloaded", r.ended.Str("detail"))
		}
		if kill, ok := s.Find("haproxy did not exit after the hard stop: killing its process group", nil); ok {
			t.Errorf("HAProxy's master outlived the hard stop under the reloads: its process group was SIGKILLed %s after SIGTERM", kill.At.Sub(r.term))
		}
		switch {
		case r.code == 0:
		case r.code == 128+int(syscall.SIGTERM) && len(s.All("hard stop")) > 0:
			t.Logf("exit code %d after the hard stop: a worker of the reloads still had sessions at the deadline", r.code)
		default:
			t.Errorf("exit code %d, want 0 (or %d after a hard stop)", r.code, 128+int(syscall.SIGTERM))
		}
		if toExit := r.exitAt.Sub(r.term); toExit >= b.grace {
			t.Errorf("hapsuper exited %s after SIGTERM, at or after the grace period %s, where the kubelet's SIGKILL comes", toExit, b.grace)
		}
		checkNoHAProxyLeft(t, dir)
	})
}
