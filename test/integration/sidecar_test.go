package integration

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/hapsuper/hapsuper/test/harness"
	"github.com/hapsuper/hapsuper/test/harness/kube"
)

// sidecarPod is HAProxy started by the test as the HAProxy container of a
// pod would start it (master-worker, its master CLI on a directory both
// containers mount), and `hapsuper sidecar` beside it on that directory.
type sidecarPod struct {
	shared  string // the shared volume: master.sock, gate.sock
	haproxy *bareHAProxy
	sidecar *supervisor
}

// startSidecarPod starts HAProxy h with cfg, then the sidecar with routing
// off (no apiserver here: every gate request is a stop) and the quiet
// period 1 s.
func startSidecarPod(t *testing.T, h haproxyVersion, cfg haproxyConfig, flags ...string) *sidecarPod {
	t.Helper()
	b := startBare(t, h, cfg, cfg.webAddr())
	shared := filepath.Dir(b.sock)
	dir := t.TempDir()
	args := append([]string{"sidecar", "--routing", "off", "--log-format", "json",
		"--master-socket", b.sock, "--gate-socket", filepath.Join(shared, "gate.sock"),
		"--status-socket", filepath.Join(dir, "status.sock"),
		"--grace-period", "20s", "--quiet-period", "1s", "--poll-interval", "50ms"}, flags...)
	s := startCommand(t, dir, procOptions{}, args)
	s.waitLog("haproxy found", 10*time.Second)
	return &sidecarPod{shared: shared, haproxy: b, sidecar: s}
}

// gate runs `hapsuper gate` on the shared socket, as an exec preStop hook
// does, and returns when it exited.
type gateRun struct {
	done   chan struct{}
	code   int
	out    bytes.Buffer
	errOut bytes.Buffer
	end    time.Time
}

func (p *sidecarPod) askGate(t *testing.T) *gateRun {
	t.Helper()
	return p.runHook(t, hapsuperBin(t), "gate", "--gate-socket", filepath.Join(p.shared, "gate.sock"), "--timeout", "60s")
}

// askComponentHook runs the preStop command of deploy/components/sidecar,
// on this pod's gate socket.
func (p *sidecarPod) askComponentHook(t *testing.T) *gateRun {
	t.Helper()
	r := kube.Render(t, filepath.Join(kube.DeployDir(t), "overlays", "sidecar"))
	for _, obj := range r.Find("Deployment") {
		cs, _, _ := unstructured.NestedSlice(obj.Object, "spec", "template", "spec", "containers")
		if len(cs) == 0 {
			break
		}
		argv, _, _ := unstructured.NestedStringSlice(cs[0].(map[string]any), "lifecycle", "preStop", "exec", "command")
		if len(argv) == 0 {
			break
		}
		for i := range argv {
			argv[i] = strings.ReplaceAll(argv[i], "/var/run/hapsuper/gate.sock", filepath.Join(p.shared, "gate.sock"))
		}
		return p.runHook(t, argv...)
	}
	t.Fatal("deploy/overlays/sidecar renders no Deployment whose first container has an exec preStop hook")
	return nil
}

// runHook runs argv as the HAProxy container's preStop hook.
func (p *sidecarPod) runHook(t *testing.T, argv ...string) *gateRun {
	t.Helper()
	g := &gateRun{done: make(chan struct{})}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = &g.out, &g.errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(g.done)
		cmd.Wait()
		g.code, g.end = cmd.ProcessState.ExitCode(), time.Now()
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-g.done
	})
	return g
}

func (g *gateRun) wait(t *testing.T, bound time.Duration) bool {
	t.Helper()
	select {
	case <-g.done:
		return true
	case <-time.After(bound):
		return false
	}
}

// The gate holds the hook while clients send, opens once they are quiet;
// the soft stop the kubelet then sends (SIGUSR1, the official image's
// STOPSIGNAL) is seen over the master CLI while a request is in flight,
// and the sidecar exits 0 once HAProxy is gone. No client request failed
// before the gate opened, the in-flight one finished, and every request
// after the soft stop was refused (the listeners closed), none reset.
func TestSidecar_GateHoldsUntilQuiet(t *testing.T) {
	eachHAProxy(t, func(t *testing.T, h haproxyVersion) {
		cfg := newConfig(t)
		p := startSidecarPod(t, h, cfg)
		cont := startContinuous(t, cfg.webAddr(), 20*time.Millisecond, 30*time.Second)
		time.Sleep(500 * time.Millisecond)

		asked := time.Now()
		g := p.askGate(t)
		hook := p.askComponentHook(t) // the exec hook deploy/components/sidecar gives
		if g.wait(t, 2*time.Second) {
			t.Fatalf("the gate answered at once while clients send: exit %d, %q %q", g.code, g.out.String(), g.errOut.String())
		}
		cont.stop() // quiet from here
		quietFrom := time.Now()
		if !g.wait(t, 15*time.Second) {
			t.Fatal("the gate did not open within 15 s of quiet")
		}
		if g.code != 0 || !strings.Contains(g.out.String(), "drain ended quiet") {
			t.Errorf("gate: exit %d, stdout %q, stderr %q; want 0 and 'drain ended quiet'", g.code, g.out.String(), g.errOut.String())
		}
		// Quiet counts from the last request HAProxy saw, which the client
		// sent at or before its last start.
		if held := g.end.Sub(cont.rec.lastStart()); held < time.Second {
			t.Errorf("the gate opened %v after the last request was sent, before the quiet period (1s)", held)
		}
		if !hook.wait(t, time.Second) || hook.code != 0 || !strings.Contains(hook.out.String(), "drain ended quiet") {
			t.Errorf("the component's hook: exit %d, stdout %q, stderr %q; want 0 and 'drain ended quiet' with the other request", hook.code, hook.out.String(), hook.errOut.String())
		}
		t.Logf("gate held %v (asked at +0, quiet from +%v)", g.end.Sub(asked).Round(time.Millisecond), quietFrom.Sub(asked).Round(time.Millisecond))

		slow := startSlow(t, cfg.webAddr(), 2*time.Second) // in flight across the soft stop
		time.Sleep(200 * time.Millisecond)
		soft := p.haproxy.signal(t, syscall.SIGUSR1) // the kubelet's stop signal
		after := startContinuous(t, cfg.webAddr(), 20*time.Millisecond, 2*time.Second)
		seen := p.sidecar.waitLog("soft stop seen: every worker is stopping", 10*time.Second)
		code, exitAt := p.sidecar.waitExit(15 * time.Second)
		after.stop()
		if !slow.wait(5 * time.Second) {
			t.Error("the in-flight request did not end")
		}
		if s := slow.rec.all(); len(s) != 1 || s[0].kind != harness.KindOK {
			t.Errorf("in-flight request across the soft stop: %v, want one 200", s)
		}
		if code != 0 {
			t.Errorf("sidecar exit code %d after HAProxy left, want 0", code)
		}
		if !seen.At.After(g.end) {
			t.Errorf("soft stop seen at %v, before the gate opened at %v", seen.At, g.end)
		}
		gone := p.sidecar.waitLog("haproxy gone", time.Second)
		if gone.Str("reason") != "quiet" {
			t.Errorf("haproxy gone: reason %q, want quiet", gone.Str("reason"))
		}
		t.Logf("sidecar exited %v after the soft stop", exitAt.Sub(soft).Round(time.Millisecond))
		t.Log(cont.rec.summary())
		if bad := cont.rec.where(func(o outcome) bool { return o.kind != harness.KindOK }); len(bad) > 0 {
			t.Errorf("%d requests failed while the gate held:%s", len(bad), describe(bad, 5))
		}
		if bad := after.rec.where(func(o outcome) bool {
			return o.start.After(soft.Add(100*time.Millisecond)) && o.kind != harness.KindRefused
		}); len(bad) > 0 {
			t.Errorf("%d requests after the soft stop not refused:%s", len(bad), describe(bad, 5))
		}
	})
}

// A sidecar that crashes while it holds the gate releases the hook at once
// (the hook fails, the kubelet records FailedPreStopHook and stops the
// container): the hook never waits for the grace period. With no sidecar
// at all the hook fails at once too.
func TestSidecar_CrashedSidecarFailsTheHookFast(t *testing.T) {
	requireRoot(t)
	h := versions[0]
	cfg := newConfig(t)
	p := startSidecarPod(t, h, cfg)
	cont := startContinuous(t, cfg.webAddr(), 20*time.Millisecond, 20*time.Second)
	defer cont.stop()
	g, hook := p.askGate(t), p.askComponentHook(t)
	if g.wait(t, time.Second) {
		t.Fatalf("the gate answered at once while clients send: %q", g.out.String())
	}
	killed := time.Now()
	p.sidecar.Signal(syscall.SIGKILL)
	for name, r := range map[string]*gateRun{"hapsuper gate": g, "the component's hook": hook} {
		if !r.wait(t, 3*time.Second) {
			t.Fatalf("%s still waits 3 s after the sidecar was killed", name)
		}
		if r.code != 1 {
			t.Errorf("%s: exit %d after the sidecar was killed, want 1; stderr %q", name, r.code, r.errOut.String())
		}
		t.Logf("%s failed %v after the sidecar's SIGKILL: %s", name, r.end.Sub(killed).Round(time.Millisecond), strings.TrimSpace(r.errOut.String()))
	}

	again, hookAgain := p.askGate(t), p.askComponentHook(t)
	for name, r := range map[string]*gateRun{"hapsuper gate": again, "the component's hook": hookAgain} {
		if !r.wait(t, 3*time.Second) {
			t.Fatalf("%s: with no sidecar the hook still waits after 3 s", name)
		}
		if r.code == 0 {
			t.Errorf("%s without a sidecar: exit 0, want a failure; stderr %q", name, r.errOut.String())
		}
	}
	if !strings.Contains(again.errOut.String(), "no sidecar answers") {
		t.Errorf("hapsuper gate without a sidecar: stderr %q, want 'no sidecar answers'", again.errOut.String())
	}
}

// A reload during the drain (SIGUSR2 to the master, as a controller or an
// operator would send it) starts a new worker whose counters begin at zero
// beside the old one finishing: the gate keeps holding while clients send
// to either, opens once both are quiet, and the soft stop after it ends
// both; no request fails.
func TestSidecar_ReloadDuringDrain(t *testing.T) {
	eachHAProxy(t, func(t *testing.T, h haproxyVersion) {
		cfg := newConfig(t)
		p := startSidecarPod(t, h, cfg)
		cont := startContinuous(t, cfg.webAddr(), 20*time.Millisecond, 30*time.Second)
		time.Sleep(500 * time.Millisecond)
		g := p.askGate(t)
		time.Sleep(500 * time.Millisecond)
		reloaded := p.haproxy.signal(t, syscall.SIGUSR2)
		if g.wait(t, 2500*time.Millisecond) {
			t.Fatalf("the gate opened across the reload while clients send: %q", g.out.String())
		}
		cont.stop()
		quietFrom := time.Now()
		if !g.wait(t, 15*time.Second) {
			t.Fatal("the gate did not open within 15 s of quiet")
		}
		if g.code != 0 || !strings.Contains(g.out.String(), "drain ended quiet") {
			t.Errorf("gate: exit %d, %q %q; want 0 and 'drain ended quiet'", g.code, g.out.String(), g.errOut.String())
		}
		if held := g.end.Sub(cont.rec.lastStart()); held < time.Second {
			t.Errorf("the gate opened %v after the last request was sent, before the quiet period (1s)", held)
		}
		p.haproxy.signal(t, syscall.SIGUSR1)
		code, _ := p.sidecar.waitExit(15 * time.Second)
		if code != 0 {
			t.Errorf("sidecar exit code %d, want 0", code)
		}
		t.Logf("gate open %v after the reload, %v after quiet; %s", g.end.Sub(reloaded).Round(time.Millisecond),
			g.end.Sub(quietFrom).Round(time.Millisecond), cont.rec.summary())
		if bad := cont.rec.where(func(o outcome) bool { return o.kind != harness.KindOK }); len(bad) > 0 {
			t.Errorf("%d requests failed across the reload:%s", len(bad), describe(bad, 5))
		}
	})
}
