package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hapsuper/hapsuper/test/harness"
)

// HAProxy supervised by real s6 (s6-svscan, as s6-overlay runs it in HAProxy
// Technologies' images, whose stop signal hard-stops HAProxy), the sidecar
// beside it with --s6-service on the service directory. The gate holds the
// hook while clients send; at the drain's end the sidecar soft-stops HAProxy
// through s6 (once: not restarted), a request in flight finishes, and the
// gate answers only once HAProxy is gone, so the container's stop signal
// finds nothing to hard-stop. s6-svstat then says the service is down and
// wanted up no more; the sidecar exits 0.
func TestSidecar_S6SoftStop(t *testing.T) {
	requireRoot(t)
	svscan, err := exec.LookPath("s6-svscan")
	if err != nil {
		t.Fatalf("s6 is not installed (apt-get install s6; hack/setup.sh installs it): %v", err)
	}
	h := versions[0]
	cfg := newConfig(t)
	dir := t.TempDir()
	scan := filepath.Join(dir, "service")
	svc := filepath.Join(scan, "haproxy")
	if err := os.MkdirAll(svc, 0o755); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "master.sock")
	run := "#!/bin/sh\nexec " + h.command(t, dir) + " -W -db -S " + sock + " -f " + cfg.write(t, dir) + " 2>&1\n"
	if err := os.WriteFile(filepath.Join(svc, "run"), []byte(run), 0o755); err != nil {
		t.Fatal(err)
	}
	s6, err := harness.Start(exec.Command(svscan, scan))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		exec.Command("s6-svc", "-dx", svc).Run() // stop HAProxy and its supervisor
		s6.Kill()
		killLeftovers(t, dir)
	})
	waitListening(t, cfg.webAddr(), 10*time.Second)

	sdir := t.TempDir()
	s := startCommand(t, sdir, procOptions{}, []string{"sidecar", "--routing", "off", "--log-format", "json",
		"--master-socket", sock, "--gate-socket", filepath.Join(dir, "gate.sock"), "--status-socket", filepath.Join(sdir, "status.sock"),
		"--s6-service", svc, "--grace-period", "20s", "--quiet-period", "1s", "--poll-interval", "50ms"})
	s.waitLog("haproxy found", 10*time.Second)
	p := &sidecarPod{shared: dir, sidecar: s}

	cont := startContinuous(t, cfg.webAddr(), 20*time.Millisecond, 30*time.Second)
	time.Sleep(500 * time.Millisecond)
	asked := time.Now()
	g := p.askGate(t)
	time.Sleep(time.Second)
	cont.stop()
	slow := startSlow(t, cfg.webAddr(), 2*time.Second) // in flight across the soft stop
	if !g.wait(t, 15*time.Second) {
		t.Fatal("the gate did not open within 15 s")
	}
	softSent := s.waitLog("soft stop sent through s6: the gate holds until HAProxy is gone", time.Second)
	gone := s.waitLog("haproxy gone", time.Second)
	if !strings.Contains(g.out.String(), "gone") || g.code != 0 {
		t.Errorf("gate: exit %d %q, want 0 and an answer once HAProxy is gone", g.code, g.out.String())
	}
	if g.end.Before(gone.At) {
		t.Errorf("the gate answered at %v, before HAProxy was gone at %v", g.end, gone.At)
	}
	if !slow.wait(5 * time.Second) {
		t.Fatal("the in-flight request did not end")
	}
	if r := slow.rec.all(); len(r) != 1 || r[0].kind != harness.KindOK {
		t.Errorf("the request in flight across the s6 soft stop: %v, want one 200", r)
	}
	code, _ := s.waitExit(10 * time.Second)
	if code != 0 {
		t.Errorf("sidecar exit %d, want 0", code)
	}
	time.Sleep(1500 * time.Millisecond) // s6-supervise restarts a service that is wanted up after 1 s
	st, _ := exec.Command("s6-svstat", svc).CombinedOutput()
	t.Logf("s6 soft stop sent %v after the gate was asked; HAProxy gone %v later; gate answered %v after that; s6-svstat: %s",
		softSent.At.Sub(asked).Round(time.Millisecond), gone.At.Sub(softSent.At).Round(time.Millisecond),
		g.end.Sub(gone.At).Round(time.Millisecond), strings.TrimSpace(string(st)))
	if !strings.HasPrefix(string(st), "down") {
		t.Errorf("s6-svstat %q: want the service down, not restarted", st)
	}
	if bad := cont.rec.where(func(o outcome) bool { return o.kind != harness.KindOK }); len(bad) > 0 {
		t.Errorf("%d requests failed while the gate held:%s", len(bad), describe(bad, 5))
	}
}
