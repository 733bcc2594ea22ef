package k8s_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hapsuper/hapsuper/test/harness/kube"
	"github.com/hapsuper/hapsuper/test/k8s/k8stest"
)

// sidecarGatePort is the HTTP gate's port in the pod (--gate-addr).
const sidecarGatePort = 8406

// sidecarPod is a pod as a pod spec with hapsuper as a native sidecar runs
// it: HAProxy started on its own (the HAProxy container: master-worker,
// its master CLI on the volume both containers mount) and `hapsuper
// sidecar` beside it, in the pod's network namespace.
type sidecarPod struct {
	pod     *k8stest.Pod
	shared  string
	haproxy *kube.Container
	sidecar *kube.Container
}

// startSidecarPod adds pod name (label app) on node, starts HAProxy and
// the sidecar (routing kube-proxy, the env's kubeconfig), and waits until
// the sidecar found HAProxy and its watch synced. The pod is not Ready.
func (e *drainEnv) startSidecarPod(t *testing.T, node int, name, app string) *sidecarPod {
	t.Helper()
	pod := e.H.AddPod(t, node, name, map[string]string{"app": app})
	shared := e.PodDir(t, name)
	cfg := filepath.Join(shared, "haproxy.cfg")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, haproxyCfg, pod.IP, name), 0o644); err != nil {
		t.Fatal(err)
	}
	p := &sidecarPod{pod: pod, shared: shared}
	p.haproxy = kube.StartContainer(t, pod, "/usr/sbin/haproxy", "-W", "-db", "-S", filepath.Join(shared, "master.sock"), "-f", cfg)
	p.sidecar = kube.StartContainer(t, pod, e.Bin, "sidecar",
		"--routing", "kube-proxy", "--kubeconfig", e.Kubeconfig,
		"--grace-period", drainGrace.String(), "--quiet-period", drainQuiet.String(), "--log-format", "json",
		"--master-socket", filepath.Join(shared, "master.sock"),
		"--gate-socket", filepath.Join(shared, "gate.sock"),
		"--gate-addr", fmt.Sprintf(":%d", sidecarGatePort),
		"--status-socket", filepath.Join(shared, "status.sock"))
	t.Cleanup(func() {
		if t.Failed() || os.Getenv("HAPSUPER_K8S_DRAIN_LOG") != "" {
			t.Logf("sidecar log of pod %s:\n%s", name, p.sidecar.Tail(60))
		}
	})
	for _, msg := range []string{"haproxy found", "routing watch synced"} {
		if _, ok := p.sidecar.Wait(msg, nil, 45*time.Second, p.sidecar.Done()); !ok {
			t.Fatalf("pod %s: no %q in the sidecar's log; log:\n%s", name, msg, p.sidecar.Tail(30))
		}
	}
	return p
}

// hook runs `hapsuper gate` on the shared socket, as the HAProxy
// container's exec preStop hook does; its result arrives on the channel.
type hookResult struct {
	code int
	out  string
	end  time.Time
}

func (p *sidecarPod) hook(t *testing.T, bin string) <-chan hookResult {
	t.Helper()
	ch := make(chan hookResult, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 2*drainGrace)
	cmd := exec.CommandContext(ctx, bin, "gate", "--gate-socket", filepath.Join(p.shared, "gate.sock"))
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	go func() {
		defer cancel()
		cmd.Wait()
		ch <- hookResult{code: cmd.ProcessState.ExitCode(), out: strings.TrimSpace(out.String()), end: time.Now()}
	}()
	return ch
}

// Two pods behind a ClusterIP Service, clients on both nodes. web-a runs
// HAProxy without hapsuper and hapsuper as its sidecar. A gate request
// while the pod is not being deleted (a liveness restart's hook, a stray
// GET on the pod's IP) is answered at once and starts nothing. Then the
// pod is deleted and the hook asks at once, as the kubelet does: the gate
// holds it until routing is withdrawn (kube-proxy confirmed on both nodes)
// and quiet; only then the stop signal (SIGUSR1) soft-stops HAProxy. No
// request fails, none reaches web-a after the withdrawal, the drain ends
// routed-away with its Event, and both processes exit 0.
func TestSidecar_RoutedAway(t *testing.T) {
	e := newDrainEnv(t, k8stest.Options{Nodes: 2})
	url := e.service(t, "web", false)
	a := e.startSidecarPod(t, 1, "web-a", "web")
	e.startPlainPod(t, 2, "web-b", "web")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.H.SetPodReady(ctx, a.pod, true); err != nil {
		t.Fatal(err)
	}
	e.waitRouted(t, url, map[int][]string{1: {"web-a", "web-b"}, 2: {"web-a", "web-b"}})
	tr := startTraffic(t, url, e.H.Nodes(), nil)

	// Not deleted: the hook and the HTTP gate answer at once.
	asked := time.Now()
	select {
	case r := <-a.hook(t, e.Bin):
		if r.code != 0 || !strings.Contains(r.out, "not being deleted") {
			t.Errorf("hook while not deleting: exit %d %q", r.code, r.out)
		}
		t.Logf("hook while not deleting answered in %v: %s", r.end.Sub(asked).Round(time.Millisecond), r.out)
	case <-time.After(5 * time.Second):
		t.Fatal("the hook waits while the pod is not being deleted")
	}
	gateURL := fmt.Sprintf("http://%s:%d/gate", a.pod.IP, sidecarGatePort)
	resp, err := e.H.Node(2).HTTPClient(5 * time.Second).Get(gateURL)
	if err != nil {
		t.Fatalf("HTTP gate from node2: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "not being deleted") {
		t.Errorf("HTTP gate while not deleting: %d %q", resp.StatusCode, body)
	}
	if _, ok := a.sidecar.Find("drain started", nil); ok {
		t.Fatal("a gate request while not deleting started the drain")
	}

	// The deletion, and the hook right after it.
	if err := e.H.DeletePod(ctx, a.pod, drainGrace); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	hook := a.hook(t, e.Bin)
	var r hookResult
	select {
	case r = <-hook:
	case <-time.After(drainGrace):
		t.Fatalf("the gate held the hook for the whole grace period")
	}
	if r.code != 0 || !strings.Contains(r.out, "routed-away") {
		t.Errorf("hook during the deletion: exit %d %q, want 0 and routed-away", r.code, r.out)
	}
	soft := time.Now()
	if err := a.haproxy.Signal(syscall.SIGUSR1); err != nil { // the official image's STOPSIGNAL
		t.Fatal(err)
	}
	for name, c := range map[string]*kube.Container{"haproxy": a.haproxy, "sidecar": a.sidecar} {
		select {
		case <-c.Done():
		case <-time.After(drainGrace):
			t.Fatalf("%s still runs %v after the soft stop", name, drainGrace)
		}
		if code, _ := c.Exit(); code != 0 {
			t.Errorf("%s exit code %d, want 0", name, code)
		}
	}
	a.sidecar.WaitRead(2 * time.Second)
	time.Sleep(300 * time.Millisecond)
	tr.Stop()
	t.Logf("clients: %s", tr.summary())

	d := a.sidecar.ReadDrain(time.Time{})
	rec := drainRecord{pod: "web-a", deleted: deleted, term: deleted, Drain: d}
	gone, _ := a.sidecar.Find("haproxy gone", nil)
	t.Logf("web-a: drain started +%v, withdrawn +%v, drain ended +%v (%s), hook answered +%v, HAProxy gone +%v",
		d.Started.Sub(deleted).Round(time.Millisecond), d.Withdrawn.Sub(deleted).Round(time.Millisecond),
		d.Ended.Sub(deleted).Round(time.Millisecond), d.Reason, r.end.Sub(deleted).Round(time.Millisecond),
		gone.At.Sub(deleted).Round(time.Millisecond))
	checkNoFailures(t, tr, time.Time{})
	checkReason(t, rec, "routed-away")
	checkNoDNATAfterWithdrawn(t, tr, rec)
	if r.end.Before(d.Withdrawn) {
		t.Errorf("the hook was answered at %v, before routing was withdrawn at %v", r.end, d.Withdrawn)
	}
	if soft.Before(d.Ended) {
		t.Errorf("soft stop at %v before the drain ended at %v", soft, d.Ended)
	}
	if note, ok := e.drainEvent(t, "web-a"); ok {
		t.Logf("Event DrainEnded on web-a: %s", note)
	} else {
		t.Error("no Event DrainEnded on web-a")
	}
}

// The last ready pod of its Service, deleted with a grace period shorter
// than the sidecar's --grace-period: nothing else serves, so routing stays
// pending and the gate holds to the bound, which follows the pod's own
// grace period (the drain's share of grace − margin) and leaves the stop
// signal what the kubelet gives after the hook, grace − ⌊hook seconds⌋,
// more than the margin.
func TestSidecar_ShortGraceBound(t *testing.T) {
	e := newDrainEnv(t, k8stest.Options{Nodes: 2})
	url := e.service(t, "web", false)
	a := e.startSidecarPod(t, 1, "web-a", "web")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.H.SetPodReady(ctx, a.pod, true); err != nil {
		t.Fatal(err)
	}
	e.waitRouted(t, url, map[int][]string{1: {"web-a"}, 2: {"web-a"}})
	tr := startTraffic(t, url, e.H.Nodes(), nil)

	const grace = 6 * time.Second
	if err := e.H.DeletePod(ctx, a.pod, grace); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	var r hookResult
	select {
	case r = <-a.hook(t, e.Bin):
	case <-time.After(grace):
		t.Fatal("the gate held the hook for the whole shortened grace period")
	}
	held := r.end.Sub(deleted)
	left := grace - held.Truncate(time.Second)
	// The drain's share: --max-wait (⅔ of 12 s − 2 s) scaled to 6 s − 2 s.
	bound := time.Duration(int64(drainBound/time.Millisecond)*int64(grace-2*time.Second)/int64(drainGrace-2*time.Second)) * time.Millisecond
	t.Logf("hook held %v (bound %v): the stop signal gets %v of the %v grace period; %s", held.Round(time.Millisecond), bound.Round(time.Millisecond), left, grace, r.out)
	if !strings.Contains(r.out, "bound") {
		t.Errorf("hook answer %q, want the bound", r.out)
	}
	if held < bound-200*time.Millisecond || left < 2*time.Second {
		t.Errorf("held %v: want about the bound %v, leaving the soft stop at least the margin (2s), got %v", held, bound, left)
	}
	a.haproxy.Signal(syscall.SIGUSR1)
	select {
	case <-a.sidecar.Done():
	case <-time.After(drainGrace):
		t.Fatal("the sidecar still runs after HAProxy's soft stop")
	}
	tr.Stop()
	if code, _ := a.sidecar.Exit(); code != 0 {
		t.Errorf("sidecar exit code %d, want 0", code)
	}
	d := a.sidecar.ReadDrain(time.Time{})
	if d.Reason != "bound" {
		t.Errorf("drain ended %q (%s), want bound", d.Reason, d.Detail)
	}
	t.Logf("clients: %s", tr.summary())
	checkNoFailures(t, tr, deleted.Add(held))
}
