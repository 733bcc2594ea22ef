package k8s_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/hapsuper/hapsuper/status"
	"github.com/hapsuper/hapsuper/test/harness"
	"github.com/hapsuper/hapsuper/test/harness/kube"
	"github.com/hapsuper/hapsuper/test/k8s/k8stest"
)

// techGrace is the chart's terminationGracePeriodSeconds (the values keep
// it): the grace of the pods' deletes.
const techGrace = 60 * time.Second

// HAProxy Technologies' real controller (kubernetes-ingress v3.2.11, built
// from its source) as hapsuper's companion, the way the drop-in image runs
// it: a container made of the image's layout over an HAProxy 3.2 or 3.4
// root, the Dockerfile's ENV and ENTRYPOINT (`hapsuper -- --with-s6-overlay`)
// followed by the args and environment chart 1.52.1 renders with
// deploy/haproxytech-ingress/values.yaml, as uid 1000, the chart's
// emptyDir at /run, the ServiceAccount's token where the kubelet projects
// it (hapsuper and the controller both read it in-cluster), and the
// chart's RBAC, ConfigMap, IngressClass, default certificate and Service,
// plus hapsuper-rbac.yaml. The controller reloads HAProxy over
// /var/run/haproxy-master.sock; an Ingress routes to a backend. Two
// drains, clients on both nodes through the chart's Service: pod a under
// new-connection clients, then (a replacement started) pod b under
// kept-alive HTTP/1.1 and h2c clients. Each: no request fails, the drain
// ends routed-away, the controller is stopped before the soft stop,
// HAProxy exits before the values' keep-alive timeout has passed since the
// soft stop (its clients leave at their next request), hapsuper exits 0
// and nothing of the container is left.
func TestHAProxyTech_RealController(t *testing.T) {
	for _, v := range []string{"3.2", "3.4"} {
		t.Run("haproxy-"+v, func(t *testing.T) { runRealTech(t, v) })
	}
}

func runRealTech(t *testing.T, version string) {
	te := startTech(t, version)
	a := te.startPod(t, 1, "ingress-a")
	b := te.startPod(t, 2, "ingress-b")
	for _, n := range te.e.H.Nodes() {
		waitSeen(t, n, te.url, 30*time.Second, "web-0")
	}

	tr := startTraffic(t, te.url, te.e.H.Nodes(), nil)
	ra := te.drain(t, a, tr)
	c := te.startPod(t, 1, "ingress-c")
	time.Sleep(1200 * time.Millisecond) // c routed on every node
	kept := startPooled(t, te.url, te.e.H.Nodes(), 50*time.Millisecond, 2*time.Second)
	time.Sleep(time.Second)
	rb := te.drain(t, b, kept)
	for _, r := range []techRun{ra, rb} {
		t.Logf("HAProxy %s, %s", version, r)
	}
	_ = c
}

// The real controller through a reload storm (reloadstorm_test.go), on
// HAProxy 3.2 and 3.4: an Ingress annotation the controller turns into a
// backend change, and so a reload, edited every 2 s from before the stop
// request until hapsuper exits, while kube-proxy falls back to the deleted
// pod for 8 s because the other pod is not Ready. The controller applies
// changes once per --sync-period (5 s by default, the chart's too): the
// pods run it with --sync-period=500ms, so that each edit is its own
// reload, within about a second of it (with 1s, an edit waited up to
// 1.5 s for its reload, and once missed the 1.8 s between the last
// request and routing's confirmation).
// Nothing fails, at least three reloads land in the drain, none moves the
// quiet clock, and the drain ends routed-away within the withdrawn quiet
// period + 0.5 s of the later of the last request the pod forwarded and
// routing's withdrawal.
func TestHAProxyTech_ReloadsEveryTwoSeconds(t *testing.T) {
	for _, v := range []string{"3.2", "3.4"} {
		t.Run("haproxy-"+v, func(t *testing.T) {
			backend := &arrivals{}
			te := startTechWith(t, v, backend.handler("web-0"))
			te.controllerArgs = []string{"--sync-period=500ms"}
			a := te.startPod(t, 1, "ingress-a")
			b := te.startPod(t, 2, "ingress-b")
			for _, n := range te.e.H.Nodes() {
				waitSeen(t, n, te.url, 30*time.Second, "web-0")
			}
			s := storm{
				e: te.e, url: te.url, backend: backend, draining: a.hapPod, other: b.Pod, grace: techGrace,
				edit:    te.patchTimeoutServer,
				reloads: a.controllerReloads,
				status:  a.status,
			}
			r := s.run(t)
			t.Logf("the controller logged %d reloads required in the drain", a.reloadsRequired(r.term, r.Soft))
		})
	}
}

// patchTimeoutServer edits the Ingress's haproxy.org/timeout-server: a
// change of its backend, which the controller applies by a reload.
func (te *techEnv) patchTimeoutServer(i int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	patch := fmt.Sprintf(`{"metadata":{"annotations":{"haproxy.org/timeout-server":"%ds"}}}`, 30+i%20)
	_, err := te.e.H.Client.NetworkingV1().Ingresses(k8stest.PodNamespace).Patch(ctx, "web", types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	return err
}

// controllerReloads is the reloads the controller sent over the master
// CLI that hapsuper logged ok.
func (p *techPod) controllerReloads() []harness.Entry {
	var out []harness.Entry
	for _, l := range p.All("haproxy reloaded") {
		if l.Str("origin") == "master CLI" {
			out = append(out, l)
		}
	}
	return out
}

// reloadsRequired counts the controller's "reload required" lines (relayed
// by hapsuper) between from and to.
func (p *techPod) reloadsRequired(from, to time.Time) int {
	n := 0
	for _, l := range p.All("companion") {
		if strings.Contains(l.Str("line"), "reload required") && !l.At.Before(from) && (to.IsZero() || l.At.Before(to)) {
			n++
		}
	}
	return n
}

// status asks hapsuper's status socket, at its default path in the
// container (/var/run is the chart's emptyDir at /run), through the
// container's root.
func (p *techPod) status() (status.Snapshot, error) {
	return fetchStatus(fmt.Sprintf("/proc/%d/root/run/hapsuper/status.sock", p.Pid()))
}

// The real controller's fatal start: with a token the apiserver refuses,
// it cannot read the cluster's version and exits 0 at once ("Unable to get
// Kubernetes version", a recovered panic). hapsuper starts it again and
// again with a delay that grows, HAProxy keeps running, and `hapsuper
// status` says the controller is failing, with its last lines.
func TestHAProxyTech_RealControllerFatalStart(t *testing.T) {
	te := startTech(t, "3.4")
	p := te.launchPod(t, 1, "ingress-bad", "not-a-token")
	const restarts = 3
	deadline := time.Now().Add(90 * time.Second)
	for len(p.All("companion exited: starting it again")) < restarts {
		if time.Now().After(deadline) || p.Exited() {
			t.Fatalf("hapsuper logged %d restarts of the controller within 90s, want %d; log:\n%s", len(p.All("companion exited: starting it again")), restarts, p.Tail(60))
		}
		time.Sleep(200 * time.Millisecond)
	}
	var prev time.Duration
	for i, l := range p.All("companion exited: starting it again")[:restarts] {
		delay, err := time.ParseDuration(l.Str("in"))
		if err != nil {
			t.Fatalf("restart %d: delay %q: %v", i+1, l.Str("in"), err)
		}
		t.Logf("controller exit %d: code %s, started again in %v", i+1, l.Str("code"), delay)
		if i > 0 && delay <= prev {
			t.Errorf("restart %d after %v, the one before after %v: want the delay to grow", i+1, delay, prev)
		}
		prev = delay
	}
	// kubectl exec … -- hapsuper status --json: in the container's mount
	// namespace and root, as its user.
	out, err := exec.Command("nsenter", "-t", strconv.Itoa(p.Pid()), "-m", "-r", "-w",
		"-S", strconv.Itoa(kube.TechUID), "-G", strconv.Itoa(kube.TechUID),
		"/usr/local/bin/hapsuper", "status", "--json").CombinedOutput()
	if err != nil {
		t.Fatalf("hapsuper status --json: %v: %s", err, out)
	}
	var doc struct {
		Companion struct {
			State   string   `json:"state"`
			Failing string   `json:"failing"`
			Output  []string `json:"output"`
		} `json:"companion"`
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatalf("hapsuper status --json: %v: %s", err, out)
	}
	t.Logf("status: companion %s, failing %q, output %q", doc.Companion.State, doc.Companion.Failing, doc.Companion.Output)
	if doc.Companion.Failing == "" || !slices.ContainsFunc(doc.Companion.Output, func(l string) bool { return strings.Contains(l, "Unable to get Kubernetes version") }) {
		t.Errorf("status companion %+v: want it failing, with the controller's last line (Unable to get Kubernetes version)", doc.Companion)
	}
	if p.Exited() {
		t.Errorf("hapsuper exited: want it serving, HAProxy running, while the controller fails")
	}
}

// techEnv is the cluster with the chart's objects, the backend web-0 and
// the drop-in's layer.
type techEnv struct {
	e       *drainEnv
	version string
	root    string // the HAProxy root
	layer   string
	pod     kube.TechPod
	dropIn  kube.DropIn
	sa      string
	idle    time.Duration // the longer of the values' timeout-http-keep-alive and timeout-client
	url     string        // the chart's Service

	controllerArgs []string // more arguments of the controller, after the chart's
}

// startTech starts a 2-node cluster with the rendered chart's objects but
// its Deployment, the backend pod web-0 (node2) behind Service web, and an
// Ingress of class haproxy routing / to it.
func startTech(t *testing.T, version string) *techEnv {
	t.Helper()
	return startTechWith(t, version, nil)
}

// startTechWith is startTech with the backend's handler (nil: the pod's
// name).
func startTechWith(t *testing.T, version string, backend http.Handler) *techEnv {
	t.Helper()
	controller := kube.HAProxyTechControllerDir(t)
	root := haproxyRoot(t, version)
	env := kube.NewBareEnv(t, k8stest.Options{Nodes: 2})
	h, bin, dir := env.H, env.Bin, env.Dir
	te := &techEnv{e: &drainEnv{env}, version: version, root: root, dropIn: kube.ReadDropIn(t)}
	te.layer = filepath.Join(dir, "layer")
	kube.MakeTechLayer(t, te.layer, root, bin, controller)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ns := k8stest.PodNamespace
	r := kube.RenderHAProxyTechIn(t, ns)
	var err error
	if te.pod, err = kube.ParseTechPod(r); err != nil {
		t.Fatal(err)
	}
	te.sa = te.pod.Spec.ServiceAccountName
	ap := kube.NewApplier(t, h)
	applied, err := ap.ApplyRBAC(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range r.Objects {
		switch o.GetKind() {
		case "ConfigMap", "Secret", "IngressClass", "Service":
			if o.GetNamespace() == "" && o.GetKind() != "IngressClass" {
				o.SetNamespace(ns)
			}
			if err := ap.Apply(ctx, o, false); err != nil {
				t.Fatal(err)
			}
			applied = append(applied, o.GetKind()+"/"+o.GetName())
			if o.GetKind() == "ConfigMap" && o.GetName() == kube.HAProxyTechRelease {
				te.idle = max(configMapTime(t, o.Object, "timeout-http-keep-alive"), configMapTime(t, o.Object, "timeout-client"))
			}
		}
	}
	// hapsuper-rbac.yaml, applied in the release's namespace to the
	// release's ServiceAccount, as its comment says.
	b, err := os.ReadFile(filepath.Join(kube.DeployDir(t), "haproxytech-ingress", "hapsuper-rbac.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	extra := kube.Rendered{}
	for _, doc := range strings.Split(string(b), "\n---\n") {
		var o map[string]any
		if err := yaml.Unmarshal([]byte(strings.ReplaceAll(doc, "namespace: haproxy-controller", "namespace: "+ns)), &o); err != nil {
			t.Fatalf("hapsuper-rbac.yaml: %v", err)
		}
		u := &unstructured.Unstructured{Object: o}
		u.SetNamespace(ns)
		extra.Objects = append(extra.Objects, u)
	}
	more, err := ap.ApplyRBAC(ctx, extra)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("chart %s objects applied: %s", kube.HAProxyTechChart, strings.Join(append(applied, more...), " "))
	if te.idle <= 0 {
		t.Fatalf("the rendered ConfigMap %s has no timeout-http-keep-alive or timeout-client", kube.HAProxyTechRelease)
	}

	web := h.AddPod(t, 2, "web-0", map[string]string{"app": "web"})
	web.ServeHTTP(t, 8080, backend)
	if err := h.SetPodReady(ctx, web, true); err != nil {
		t.Fatal(err)
	}
	if _, err := te.e.Service(ctx, "web", false, corev1.ServicePort{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}); err != nil {
		t.Fatal(err)
	}
	ing := &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: networkingv1.IngressSpec{IngressClassName: ptr.To("haproxy"), Rules: []networkingv1.IngressRule{{IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
			Paths: []networkingv1.HTTPIngressPath{{Path: "/", PathType: ptr.To(networkingv1.PathTypePrefix), Backend: networkingv1.IngressBackend{
				Service: &networkingv1.IngressServiceBackend{Name: "web", Port: networkingv1.ServiceBackendPort{Number: 80}}}}},
		}}}}},
	}
	if _, err := h.Client.NetworkingV1().Ingresses(ns).Create(ctx, ing, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc, err := h.Client.CoreV1().Services(ns).Get(ctx, kube.HAProxyTechRelease, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the chart's Service: %v", err)
	}
	te.url = fmt.Sprintf("http://%s/", svc.Spec.ClusterIP)
	return te
}

// haproxyRoot is hack/haproxy-root.sh's root of version; missing, the test
// skips (fails under CI=true).
func haproxyRoot(t *testing.T, version string) string {
	t.Helper()
	roots := os.Getenv("HAPSUPER_HAPROXY_ROOTS")
	if roots == "" {
		roots = "/var/cache/hapsuper"
	}
	root := filepath.Join(roots, "haproxy-"+version)
	if _, err := os.Stat(filepath.Join(root, "usr/sbin/haproxy")); err != nil {
		msg := fmt.Sprintf("HAProxy %s: %v (make it with hack/haproxy-root.sh %s)", version, err, version)
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return root
}

// configMapTime reads a time of the controller's ConfigMap.
func configMapTime(t *testing.T, obj map[string]any, key string) time.Duration {
	t.Helper()
	data, _ := obj["data"].(map[string]any)
	s, _ := data[key].(string)
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatalf("ConfigMap %s %q: %v", key, s, err)
	}
	return d
}

// techPod is one running pod of the chart.
type techPod struct {
	*hapPod
	c *kube.TechContainer
}

// startPod starts the chart's pod name on node (launchPod); it returns
// once the controller's first reload landed, HAProxy serves its
// configuration (its healthz frontend answers the kubelet's readiness
// probe, as the chart sets it) and the pod is Ready.
func (te *techEnv) startPod(t *testing.T, node int, name string) *techPod {
	t.Helper()
	p := te.launchPod(t, node, name, "")
	p.waitControllerReloadsWithin(t, 1, 90*time.Second)
	probe := te.pod.Container.ReadinessProbe
	if probe == nil || probe.HTTPGet == nil {
		t.Fatal("the rendered container has no HTTP readiness probe")
	}
	url := fmt.Sprintf("http://%s:%s%s", p.Pod.IP, probe.HTTPGet.Port.String(), probe.HTTPGet.Path)
	waitSeenStatus(t, te.e.H.Node(node), url, 30*time.Second)
	p.ready(t)
	return p
}

// launchPod adds the chart's pod name on node, writes its ServiceAccount
// volume (a token of the chart's ServiceAccount, or token when not ""),
// and starts its container; it returns once hapsuper started HAProxy,
// synced its routing watch and started the controller.
func (te *techEnv) launchPod(t *testing.T, node int, name, token string) *techPod {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h := te.e.H
	kp := h.AddPod(t, node, name, te.pod.Labels, func(p *corev1.Pod) {
		p.Spec.Containers[0].Ports = te.pod.Container.Ports
	})
	dir := te.e.PodDir(t, name)
	sa := filepath.Join(dir, "serviceaccount")
	if err := os.MkdirAll(sa, 0o755); err != nil {
		t.Fatal(err)
	}
	if token == "" {
		tr, err := h.Client.CoreV1().ServiceAccounts(k8stest.PodNamespace).CreateToken(ctx, te.sa,
			&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("request a token of ServiceAccount %s: %v", te.sa, err)
		}
		token = tr.Status.Token
	}
	for f, b := range map[string][]byte{"token": []byte(token), "ca.crt": h.Config.CAData, "namespace": []byte(k8stest.PodNamespace)} {
		if err := os.WriteFile(filepath.Join(sa, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// The environment the container runtime gives: the image's PATH and
	// ENV, then the container's env (downward API filled in), then the
	// kubelet's Service variables for the apiserver.
	api := h.APIServer()
	env := append([]string{"PATH=/command:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOSTNAME=" + name}, te.dropIn.Env...)
	for _, v := range te.pod.Container.Env {
		switch {
		case v.ValueFrom == nil:
			env = append(env, v.Name+"="+v.Value)
		case v.ValueFrom.FieldRef != nil:
			env = append(env, v.Name+"="+fieldValue(t, kp, v.ValueFrom.FieldRef.FieldPath))
		default:
			t.Fatalf("env %s comes from a source the harness does not fill", v.Name)
		}
	}
	env = append(env, "KUBERNETES_SERVICE_HOST="+api.Addr().String(), fmt.Sprintf("KUBERNETES_SERVICE_PORT=%d", api.Port()))
	argv := append(slices.Clone(te.dropIn.Entrypoint), te.pod.Container.Args...)
	argv = append(argv, te.controllerArgs...)

	c := kube.StartTech(t, kp, filepath.Join(dir, "container"), kube.TechMounts{Layer: te.layer, Root: te.root, Token: sa}, env, argv)
	p := &techPod{hapPod: &hapPod{Container: c.Container, e: te.e, observed: true}, c: c}
	t.Cleanup(func() {
		if t.Failed() || os.Getenv("HAPSUPER_K8S_DRAIN_LOG") != "" {
			t.Logf("hapsuper log of %s ends:\n%s", name, c.Tail(80))
		}
	})
	msgs := []string{"haproxy ready", "routing watch synced", "companion started"}
	if token != "" { // a token of the test's: the watch may never sync
		msgs = []string{"haproxy ready", "companion started"}
	}
	for _, msg := range msgs {
		if _, ok := c.Wait(msg, nil, 45*time.Second, c.Done()); !ok {
			t.Fatalf("pod %s: no %q in hapsuper's log (exited %v); log:\n%s", name, msg, c.Exited(), c.Tail(40))
		}
	}
	if err := c.NoteNamespace(); err != nil {
		t.Fatal(err)
	}
	return p
}

// waitControllerReloadsWithin waits until hapsuper logged n reloads the
// controller sent over the master CLI.
func (p *techPod) waitControllerReloadsWithin(t *testing.T, n int, bound time.Duration) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for {
		got := 0
		for _, l := range p.All("haproxy reloaded") {
			if l.Str("origin") == "master CLI" {
				got++
			}
		}
		if got >= n {
			return
		}
		if time.Now().After(deadline) || p.Exited() {
			t.Fatalf("pod %s: %d controller reloads landed within %v, want %d; log:\n%s", p.Name, got, bound, n, p.Tail(60))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitSeenStatus waits until url answers 200 from node.
func waitSeenStatus(t *testing.T, n *k8stest.Node, url string, bound time.Duration) {
	t.Helper()
	client := n.HTTPClient(2 * time.Second)
	deadline := time.Now().Add(bound)
	for {
		resp, err := client.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
			err = fmt.Errorf("status %d", resp.StatusCode)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never answered 200 within %v: %v", url, bound, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// techRun is one drain's figures, relative to the SIGTERM.
type techRun struct {
	drainRecord
	requests, failed int
	companion        time.Time // "companion stopped"
}

func (r techRun) String() string {
	rel := func(at time.Time) string {
		if at.IsZero() {
			return "never"
		}
		return "+" + at.Sub(r.term).Round(10*time.Millisecond).String()
	}
	return fmt.Sprintf("%s: %d requests, %d failed; routing withdrawn %s, drain ended %s (%s), controller stopped %s, soft stop %s, HAProxy exited %s, hapsuper exited %s (code %d)",
		r.pod, r.requests, r.failed, rel(r.Withdrawn), rel(r.Ended), r.Reason, rel(r.companion), rel(r.Soft), rel(r.HAProxyExit), rel(r.exit), r.code)
}

// drain deletes p (the chart's grace), sends the kubelet's SIGTERM, waits
// for hapsuper's exit and stops tr 300 ms later; it checks the drain.
func (te *techEnv) drain(t *testing.T, p *techPod, tr *traffic) techRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := te.e.H.DeletePod(ctx, p.Pod, techGrace); err != nil {
		t.Fatal(err)
	}
	p.deletedAt = time.Now()
	p.sigterm(t)
	select {
	case <-p.Done():
	case <-time.After(techGrace + 5*time.Second):
		t.Fatalf("pod %s: hapsuper still running %v after SIGTERM; log:\n%s", p.Name, techGrace+5*time.Second, p.Tail(60))
	}
	p.WaitRead(2 * time.Second)
	time.Sleep(300 * time.Millisecond)
	tr.Stop()
	p.finish(t)

	r := techRun{drainRecord: p.record(t)}
	r.requests = len(tr.Outcomes())
	r.failed = len(tr.failedBefore(time.Time{}))
	if l, ok := p.Find("companion stopped", nil); ok {
		r.companion = l.At
	}
	t.Logf("clients: %s", tr.summary())
	t.Logf("%s", r)

	checkNoFailures(t, tr, time.Time{})
	checkReason(t, r.drainRecord, "routed-away")
	if r.code != 0 || r.HAProxyCode != 0 {
		t.Errorf("%s: hapsuper exited %d, HAProxy %v: want 0 and 0", r.pod, r.code, r.HAProxyCode)
	}
	p.checkCompanionStoppedBeforeSoftStop(t)
	// The soft stop ends every client connection at its next request
	// (idle-close-on-response, GOAWAY), or once it stayed idle for the
	// values' timeouts (http-keep-alive; client, for an HTTP/2 connection
	// its client keeps open after the GOAWAY): HAProxy's exit comes before
	// the longer of them has passed since the soft stop (3 s for a loaded
	// machine), not at the bound of the image's timeout client (50 s).
	if r.Soft.IsZero() || r.HAProxyExit.IsZero() {
		t.Errorf("%s: soft stop %v, HAProxy exit %v: want both logged", r.pod, r.Soft, r.HAProxyExit)
	} else if d := r.HAProxyExit.Sub(r.Soft); d > te.idle+3*time.Second {
		t.Errorf("%s: HAProxy exited %v after the soft stop: a connection outlived the values' idle timeouts (%v)", r.pod, d.Round(time.Millisecond), te.idle)
	}
	if left := p.c.Processes(); len(left) > 0 {
		t.Errorf("%s: processes left in the container after hapsuper exited: %v", r.pod, left)
	}
	return r
}
