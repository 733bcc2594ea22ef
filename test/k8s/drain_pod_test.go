package k8s_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hapsuper/hapsuper/test/harness"
	"github.com/hapsuper/hapsuper/test/harness/kube"
	corev1 "k8s.io/api/core/v1"
)

// hapPod is a pod whose container is hapsuper supervising HAProxy 2.6, run
// inside the pod's network namespace; the test is its kubelet.
type hapPod struct {
	*kube.Container // hapsuper; its Log holds hapsuper's output
	e               *drainEnv

	deletedAt time.Time // the delete returned
	termAt    time.Time // SIGTERM sent
	observed  bool      // routing not off: ready waits for the watch to see it
}

// haproxyCfg answers every request with the pod's name, on the pod's
// address, with the options hapsuper asks for (idle-close-on-response,
// client-fin) so that it does not warn.
const haproxyCfg = `defaults
    mode http
    timeout connect 2s
    timeout client 10s
    timeout server 10s
    timeout http-request 5s
    timeout client-fin 1s
    option idle-close-on-response

frontend web
    bind %s:8080
    http-request return status 200 content-type text/plain string "%s"
`

// startPod adds pod name (label app=app) on node and starts hapsuper in its
// network namespace, with --routing kube-proxy and the env's kubeconfig. It
// returns once HAProxy is ready and hapsuper's routing watch has synced;
// the pod is not Ready yet (see ready).
func (e *drainEnv) startPod(t *testing.T, node int, name, app string) *hapPod {
	t.Helper()
	return e.startPodWith(t, node, name, app, podOptions{})
}

// podOptions vary startPod's pod: the routing mode (default kube-proxy),
// edits of the Pod object, the quiet period and more flags.
type podOptions struct {
	routing string
	edit    func(*corev1.Pod)
	cfg     string        // HAProxy configuration template (pod address, name); default haproxyCfg
	quiet   time.Duration // --quiet-period; default drainQuiet
	flags   []string      // more flags of hapsuper
}

// startPodWith is startPod with options.
func (e *drainEnv) startPodWith(t *testing.T, node int, name, app string, o podOptions) *hapPod {
	t.Helper()
	if o.routing == "" {
		o.routing = "kube-proxy"
	}
	if o.cfg == "" {
		o.cfg = haproxyCfg
	}
	if o.quiet == 0 {
		o.quiet = drainQuiet
	}
	var edits []func(*corev1.Pod)
	if o.edit != nil {
		edits = append(edits, o.edit)
	}
	pod := e.H.AddPod(t, node, name, map[string]string{"app": app}, edits...)
	dir := e.PodDir(t, name)
	cfg := filepath.Join(dir, "haproxy.cfg")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, o.cfg, pod.IP, name), 0o644); err != nil {
		t.Fatal(err)
	}
	// Registered before StartHapsuper's: runs after the container is killed.
	var p *hapPod
	t.Cleanup(func() {
		switch {
		case p == nil:
		case os.Getenv("HAPSUPER_K8S_DRAIN_LOG") != "":
			t.Logf("hapsuper log of pod %s:\n%s", name, p.Tail(1000))
		case t.Failed():
			t.Logf("hapsuper log of pod %s ends:\n%s", name, p.Tail(40))
		}
	})
	c := e.StartHapsuper(t, pod, dir, kube.Hapsuper{Routing: o.routing, Grace: drainGrace, QuietPeriod: o.quiet, Flags: o.flags, Config: cfg})
	p = &hapPod{Container: c, e: e, observed: o.routing != "off"}
	return p
}

// ready does the kubelet's Ready=true and, unless routing is off, waits
// (bounded) until hapsuper's watch saw the pod routed to in the API.
func (p *hapPod) ready(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.e.H.SetPodReady(ctx, p.Pod, true); err != nil {
		t.Fatal(err)
	}
	if !p.observed {
		return
	}
	routed := func(l harness.Entry) bool { return strings.HasPrefix(l.Str("detail"), "routed here in the API") }
	if _, ok := p.Wait("routing", routed, 10*time.Second, p.Done()); !ok {
		t.Fatalf("pod %s: hapsuper never logged routing \"routed here in the API\" after Ready; log:\n%s", p.Name, p.Tail(30))
	}
}

// terminate does what deleting a pod does: the API delete with the grace
// period, then the kubelet's SIGTERM to the container.
func (p *hapPod) terminate(t *testing.T) {
	t.Helper()
	p.deleteOnly(t)
	p.sigterm(t)
}

// deleteOnly deletes the Pod object (grace drainGrace) without the SIGTERM.
func (p *hapPod) deleteOnly(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.e.H.DeletePod(ctx, p.Pod, drainGrace); err != nil {
		t.Fatal(err)
	}
	p.deletedAt = time.Now()
}

// sigterm sends the kubelet's stop signal.
func (p *hapPod) sigterm(t *testing.T) {
	t.Helper()
	p.termAt = time.Now()
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("hapsuper of pod %s: %v", p.Name, err)
	}
}

// waitExit waits at most timeout for hapsuper to exit.
func (p *hapPod) waitExit(t *testing.T, timeout time.Duration) {
	t.Helper()
	select {
	case <-p.Done():
	case <-time.After(timeout):
		t.Fatalf("pod %s: hapsuper still running %v after SIGTERM; log:\n%s", p.Name, timeout, p.Tail(30))
	}
	p.WaitRead(2 * time.Second) // its last lines may still be in the pipe
}

// finish removes the Pod object once the container has stopped.
func (p *hapPod) finish(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.e.H.FinishPod(ctx, p.Pod); err != nil {
		t.Fatal(err)
	}
}

// drainRecord is what one drain did, read from hapsuper's log.
type drainRecord struct {
	pod                 string
	deleted, term, exit time.Time
	code                int
	harness.Drain           // withdrawn: the first routing state=withdrawn at any time
	routingLines        int // "routing" lines after the stop
}

// record reads the drain of an exited pod from its log. A missing
// "drain ended" fails the test.
func (p *hapPod) record(t *testing.T) drainRecord {
	t.Helper()
	code, exitAt := p.Exit()
	r := drainRecord{pod: p.Name, deleted: p.deletedAt, term: p.termAt, exit: exitAt, code: code}
	if r.deleted.IsZero() {
		r.deleted = r.term
	}
	r.Drain = p.ReadDrain(time.Time{})
	if r.Ended.IsZero() {
		t.Fatalf("pod %s: no \"drain ended\" in hapsuper's log:\n%s", p.Name, p.Tail(40))
	}
	for _, l := range p.All("routing") {
		if !l.At.Before(r.term) {
			r.routingLines++
		}
	}
	return r
}

// String is the record's figures, relative to the delete.
func (r drainRecord) String() string {
	w := "never"
	if !r.Withdrawn.IsZero() {
		w = r.Withdrawn.Sub(r.deleted).Round(time.Millisecond).String()
	}
	return fmt.Sprintf("%s: withdrawn +%s, drain ended +%v (%s: %s), exit +%v code %d, %d routing log lines",
		r.pod, w, r.Ended.Sub(r.deleted).Round(time.Millisecond), r.Reason, r.Detail,
		r.exit.Sub(r.deleted).Round(time.Millisecond), r.code, r.routingLines)
}

// checkExit asserts a clean exit before the grace period ended.
func (r drainRecord) checkExit(t *testing.T) {
	t.Helper()
	if r.code != 0 {
		t.Errorf("%s: hapsuper exited %d, want 0", r.pod, r.code)
	}
	if d := r.exit.Sub(r.term); d >= drainGrace {
		t.Errorf("%s: hapsuper exited %v after SIGTERM: not within the grace period %v", r.pod, d, drainGrace)
	}
	if r.Started.IsZero() || r.Soft.IsZero() || r.HAProxyCode != 0 {
		t.Errorf("%s: log lines drain started %v, soft stop %v, haproxy exited code %v: want all, code 0",
			r.pod, !r.Started.IsZero(), !r.Soft.IsZero(), r.HAProxyCode)
	}
}

// drainUnder terminates p while tr runs, waits for hapsuper to exit and
// for the clients to run 300 ms more, stops them, and returns the record.
// The Pod object is removed (the kubelet's part) unless the API is gone.
func (p *hapPod) drainUnder(t *testing.T, tr *traffic, finish bool) drainRecord {
	t.Helper()
	p.terminate(t)
	return p.afterStop(t, tr, finish)
}

// afterStop is drainUnder's second half, for scenarios that act between
// the delete and the exit.
func (p *hapPod) afterStop(t *testing.T, tr *traffic, finish bool) drainRecord {
	t.Helper()
	r := p.ended(t, finish)
	time.Sleep(300 * time.Millisecond)
	tr.Stop()
	t.Logf("clients: %s", tr.summary())
	return r
}

// ended waits for hapsuper to exit, removes the Pod object if finish, and
// returns the drain's record, its exit checked.
func (p *hapPod) ended(t *testing.T, finish bool) drainRecord {
	t.Helper()
	p.waitExit(t, drainGrace+2*time.Second)
	if finish {
		p.finish(t)
	}
	r := p.record(t)
	t.Logf("%v", r)
	r.checkExit(t)
	return r
}
