package k8s_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hapsuper/hapsuper/test/harness/kube"
	"github.com/hapsuper/hapsuper/test/k8s/k8stest"
	corev1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// checkRow is one row of `hapsuper check --json`.
type checkRow struct {
	Area, Subject, Status, Detail, Fix string
}

// checkRun is one run of `hapsuper check`.
type checkRun struct {
	code int
	out  string
	rows []checkRow
}

// find returns the rows of area whose subject contains subject and whose
// detail or fix contains text.
func (c checkRun) find(area, subject, text string) []checkRow {
	var out []checkRow
	for _, r := range c.rows {
		if r.Area == area && strings.Contains(r.Subject, subject) && strings.Contains(r.Detail+" "+r.Fix, text) {
			out = append(out, r)
		}
	}
	return out
}

// notOK lists the rows that are neither OK nor skipped.
func (c checkRun) notOK() []checkRow {
	var out []checkRow
	for _, r := range c.rows {
		if r.Status != "OK" && r.Status != "SKIP" {
			out = append(out, r)
		}
	}
	return out
}

// runCheck runs `hapsuper check` in the pod's network namespace, with the
// pod's downward-API variables, the ServiceAccount's kubeconfig and the
// flags a drain of the suite runs with, on the HAProxy configuration cfg.
func (e *drainEnv) runCheck(t *testing.T, p *k8stest.Pod, cfg string, asJSON bool) checkRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	args := []string{"check", "--routing", "kube-proxy", "--kubeconfig", e.Kubeconfig, "--grace-period", "60s"}
	if asJSON {
		args = append(args, "--json")
	}
	args = append(args, "--", "/usr/sbin/haproxy", "-f", cfg)
	cmd := p.Command(ctx, e.Bin, args...)
	cmd.Env = []string{
		"PATH=/usr/sbin:/usr/bin:/sbin:/bin",
		"POD_NAME=" + p.Name, "POD_NAMESPACE=" + p.Namespace,
		"POD_IPS=" + p.IP.String(), "NODE_NAME=" + p.Node.Name,
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	start := time.Now()
	out, _ := cmd.Output()
	took := time.Since(start)
	if ctx.Err() != nil {
		t.Fatalf("hapsuper check still ran after 30s; stdout:\n%s", out)
	}
	c := checkRun{code: cmd.ProcessState.ExitCode(), out: string(out)}
	if stderr.Len() > 0 {
		t.Errorf("hapsuper check wrote to stderr: %s", stderr.String())
	}
	if asJSON {
		var doc struct {
			Exit int        `json:"exit"`
			Rows []checkRow `json:"rows"`
		}
		if err := json.Unmarshal(out, &doc); err != nil {
			t.Fatalf("hapsuper check --json: %v\n%s", err, out)
		}
		if doc.Exit != c.code {
			t.Errorf("JSON says exit %d, the process exited %d", doc.Exit, c.code)
		}
		c.rows = doc.Rows
	}
	t.Logf("hapsuper check took %v, exit %d", took.Round(time.Millisecond), c.code)
	return c
}

// checkUntil runs check until one row matches (the API's controllers and
// RBAC cache take a moment to follow a change), at most 10 s.
func (e *drainEnv) checkUntil(t *testing.T, p *k8stest.Pod, cfg, area, subject, text string) checkRun {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c := e.runCheck(t, p, cfg, true)
		if len(c.find(area, subject, text)) > 0 || time.Now().After(deadline) {
			return c
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// want asserts the exit code and exactly the rows that are not OK: one
// row of area, subject and status whose detail or fix says text.
func (c checkRun) want(t *testing.T, code int, area, subject, status, text string) {
	t.Helper()
	bad := c.notOK()
	if c.code != code || len(bad) != 1 || bad[0].Area != area || !strings.Contains(bad[0].Subject, subject) ||
		bad[0].Status != status || !strings.Contains(bad[0].Detail+" "+bad[0].Fix, text) {
		t.Errorf("exit %d with rows not OK %+v; want exit %d and one %s row %s %q saying %q", c.code, bad, code, status, area, subject, text)
	}
}

// `hapsuper check` in a pod of a real cluster (kube-apiserver, endpointslice
// controller, two nodes' kube-proxy, the kube-proxy overlay's RBAC on a
// ServiceAccount token, real HAProxy 2.6 for `haproxy -c`): all OK on a pod
// set up as the deploy overlays set it up; then each mistake an operator
// makes shows as its row with the exit code: a frontend without
// idle-close-on-response, a headless Service listing the pod, a node whose
// healthz is blocked, a grant removed from the Role.
func TestCheck_RealCluster(t *testing.T) {
	e := newDrainEnv(t, k8stest.Options{Nodes: 2})
	e.service(t, "web", false)
	pod := e.H.AddPod(t, 1, "web-a", map[string]string{"app": "web"})
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	if err := e.H.SetPodReady(ctx, pod, true); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(e.Dir, "check")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	good := filepath.Join(dir, "good.cfg")
	abrupt := filepath.Join(dir, "abrupt.cfg")
	for f, tmpl := range map[string]string{good: haproxyCfg, abrupt: haproxyCfgNoIdleClose} {
		if err := os.WriteFile(f, fmt.Appendf(nil, tmpl, pod.IP, pod.Name), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("all OK", func(t *testing.T) {
		c := e.checkUntil(t, pod, good, "paths", "default/web (IPv4)", "routed here in the API")
		if c.code != 0 || len(c.notOK()) > 0 {
			t.Errorf("exit %d, rows not OK: %+v; want exit 0 and none", c.code, c.notOK())
		}
		for _, w := range []struct{ area, subject, text string }{
			{"config", "haproxy -c", "valid (/usr/sbin/haproxy)"},
			{"identity", "pod default/web-a", "match the pod"},
			{"settings", "grace period", "1m0s, the pod's terminationGracePeriodSeconds"},
			{"grants", "list nodes", "allowed"},
			{"paths", "default/web (IPv4)", "endpoint ready"},
			{"kube-proxy", "node1", "IPv4 last sync"},
			{"kube-proxy", "node2", "IPv4 last sync"},
		} {
			if rows := c.find(w.area, w.subject, w.text); len(rows) != 1 || rows[0].Status != "OK" {
				t.Errorf("want one OK row %s %q saying %q, got %+v", w.area, w.subject, w.text, rows)
			}
		}
		// One list of grants: each request check asks about is allowed by
		// a rule of the overlay the env applied, and each rule allows a
		// request check asks about.
		overlay, err := kube.RenderIn(t, "overlays/kube-proxy", k8stest.PodNamespace, "").Grants()
		if err != nil {
			t.Fatal(err)
		}
		used := make([]bool, len(overlay))
		for _, r := range c.rows {
			if r.Area != "grants" {
				continue
			}
			i := slices.IndexFunc(overlay, func(g kube.Grant) bool { return g.Allows(r.Subject) })
			if i < 0 {
				t.Errorf("hapsuper check asks for %q; no rule of deploy/overlays/kube-proxy grants it", r.Subject)
				continue
			}
			used[i] = true
		}
		for i, g := range overlay {
			if !used[i] {
				t.Errorf("deploy/overlays/kube-proxy grants %v; hapsuper check asks for nothing it allows", g)
			}
		}
		text := e.runCheck(t, pod, good, false)
		t.Logf("hapsuper check:\n%s", text.out)
		if text.code != 0 || !strings.Contains(text.out, "OK: ") {
			t.Errorf("text run: exit %d, output lacks the summary", text.code)
		}
	})

	t.Run("no idle-close-on-response", func(t *testing.T) {
		c := e.runCheck(t, pod, abrupt, true)
		c.want(t, 1, "config", "frontend web", "WARN", "add `option idle-close-on-response` to defaults or frontend web")
	})

	t.Run("headless Service", func(t *testing.T) {
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web-dns"}, Spec: corev1.ServiceSpec{
			ClusterIP: corev1.ClusterIPNone, Selector: map[string]string{"app": "web"},
			Ports: []corev1.ServicePort{{Name: "http", Port: 8080}},
		}}
		if _, err := e.H.Client.CoreV1().Services(k8stest.PodNamespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		defer func() {
			// The Service and its slices, as the garbage collector (not
			// run by the harness) would remove them.
			if err := e.H.Client.CoreV1().Services(k8stest.PodNamespace).Delete(ctx, svc.Name, metav1.DeleteOptions{}); err != nil {
				t.Error(err)
			}
			if err := e.H.Client.DiscoveryV1().EndpointSlices(k8stest.PodNamespace).DeleteCollection(ctx, metav1.DeleteOptions{},
				metav1.ListOptions{LabelSelector: discovery.LabelServiceName + "=" + svc.Name}); err != nil {
				t.Error(err)
			}
		}()
		c := e.checkUntil(t, pod, good, "paths", "default/web-dns", "headless Service")
		c.want(t, 1, "paths", "default/web-dns", "WARN", "headless Service: DNS clients hold the pod's IP")
	})

	// A LoadBalancer Service with externalTrafficPolicy Local: web-a is
	// node1's only ready pod, so check asks node1's health check node port
	// from the pod (kube-proxy answers 200, one local endpoint) and says the
	// window is unknown, naming the setting.
	t.Run("load balancer, externalTrafficPolicy Local", func(t *testing.T) {
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web-lb"}, Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeLoadBalancer, ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyLocal,
			Selector: map[string]string{"app": "web"},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}},
		}}
		created, err := e.H.Client.CoreV1().Services(k8stest.PodNamespace).Create(ctx, svc, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := e.H.Client.CoreV1().Services(k8stest.PodNamespace).Delete(ctx, svc.Name, metav1.DeleteOptions{}); err != nil {
				t.Error(err)
			}
			if err := e.H.Client.DiscoveryV1().EndpointSlices(k8stest.PodNamespace).DeleteCollection(ctx, metav1.DeleteOptions{},
				metav1.ListOptions{LabelSelector: discovery.LabelServiceName + "=" + svc.Name}); err != nil {
				t.Error(err)
			}
		}()
		url := fmt.Sprintf("http://%s:%d/", pod.Node.IP, created.Spec.HealthCheckNodePort)
		c := e.checkUntil(t, pod, good, "paths", "default/web-lb external health check", "HTTP 200, localEndpoints 1")
		c.want(t, 1, "paths", "default/web-lb external window", "WARN", "set --lb-health-check-window")
		for _, w := range []struct{ subject, text string }{
			{"default/web-lb external", "this pod is node node1's only ready pod"},
			{"default/web-lb external health check", url + " reachable from the pod: HTTP 200, localEndpoints 1"},
		} {
			if rows := c.find("paths", w.subject, w.text); len(rows) != 1 || rows[0].Status != "OK" {
				t.Errorf("want one OK row paths %q saying %q, got %+v", w.subject, w.text, rows)
			}
		}
	})

	t.Run("node2 healthz blocked", func(t *testing.T) {
		e.nft(t, 2, fmt.Sprintf(`table ip hapsuper-check {
	chain in { type filter hook input priority -10; policy accept; tcp dport %d drop; }
}
`, k8stest.HealthzPort))
		defer e.nft(t, 2, "delete table ip hapsuper-check\n")
		c := e.runCheck(t, pod, good, true)
		c.want(t, 1, "kube-proxy", "node2", "WARN", "unreachable")
		if rows := c.find("kube-proxy", "node1", "IPv4 last sync"); len(rows) != 1 || rows[0].Status != "OK" {
			t.Errorf("node1: %+v, want one OK row", rows)
		}
	})

	t.Run("grant removed", func(t *testing.T) {
		roles := e.H.Client.RbacV1().Roles(k8stest.PodNamespace)
		role, err := roles.Get(ctx, "hapsuper", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range role.Rules {
			if slices.Contains(r.Resources, "endpointslices") {
				role.Rules[i].Verbs = slices.DeleteFunc(slices.Clone(r.Verbs), func(v string) bool { return v == "watch" })
			}
		}
		if _, err := roles.Update(ctx, role, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		c := e.checkUntil(t, pod, good, "grants", "watch endpointslices", "denied")
		c.want(t, 3, "grants", "watch endpointslices.discovery.k8s.io", "FAIL",
			"grant watch endpointslices.discovery.k8s.io to the pod's service account (deploy/overlays/endpointslices/rbac.yaml)")
		text := e.runCheck(t, pod, abrupt, false)
		t.Logf("hapsuper check, watch on endpointslices removed, frontend without idle-close-on-response:\n%s", text.out)
		if text.code != 3 {
			t.Errorf("text run: exit %d, want 3 (failures)", text.code)
		}
	})
}
