package check

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/hapsuper/hapsuper/conf"
	"github.com/hapsuper/hapsuper/routing/kube"
	"github.com/hapsuper/hapsuper/routing/kube/kubefake"
)

// gracefulCfg is a configuration check has nothing to say about.
const gracefulCfg = `defaults
    mode http
    timeout client 10s
    timeout http-keep-alive 5s
    timeout client-fin 1s
    option idle-close-on-response

frontend web
    bind :8080
    http-request return status 200
`

// cluster is a fake apiserver holding pod web-a on node n1 (10.0.0.5),
// Service web whose slice lists it ready, node n1 whose kube-proxy healthz
// is a test server, and an authorizer that allows all but denied.
type cluster struct {
	objects []runtime.Object
	denied  map[string]bool // "verb resource.group"
	healthz *httptest.Server
	env     map[string]string
}

func newCluster(t *testing.T) *cluster {
	t.Helper()
	c := &cluster{denied: map[string]bool{}}
	c.healthz = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		now := time.Now().UTC()
		fmt.Fprintf(w, `{"lastUpdated":%q,"currentTime":%q,"nodeEligible":true,"healthy":true,"status":{"IPv4":{"lastUpdated":%q,"healthy":true}}}`,
			now.Format(time.RFC3339Nano), now.Format(time.RFC3339Nano), now.Add(-3*time.Second).Format(time.RFC3339Nano))
	}))
	t.Cleanup(c.healthz.Close)
	c.objects = []runtime.Object{
		&corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "web-a", Namespace: "default"},
			Spec:       corev1.PodSpec{NodeName: "n1", TerminationGracePeriodSeconds: ptr.To[int64](30)},
			Status:     corev1.PodStatus{PodIP: "10.0.0.5", PodIPs: []corev1.PodIP{{IP: "10.0.0.5"}}},
		},
		node("n1", "127.0.0.1"),
		service("web", "10.96.0.10", nil),
		slice("web-1", "web", nil),
	}
	c.env = map[string]string{"POD_NAME": "web-a", "POD_NAMESPACE": "default", "NODE_NAME": "n1", "POD_IPS": "10.0.0.5"}
	return c
}

func node(name, ip string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}}}}
}

func service(name, clusterIP string, labels map[string]string) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: labels},
		Spec: corev1.ServiceSpec{ClusterIP: clusterIP, Type: corev1.ServiceTypeClusterIP,
			Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}}
}

// slice lists web-a, ready, for Service svc.
func slice(name, svc string, extra map[string]string) *discovery.EndpointSlice {
	labels := map[string]string{discovery.LabelServiceName: svc}
	for k, v := range extra {
		labels[k] = v
	}
	return &discovery.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: name, Namespace: "default", Labels: labels},
		AddressType: discovery.AddressTypeIPv4,
		Endpoints: []discovery.Endpoint{{
			Addresses:  []string{"10.0.0.5"},
			Conditions: discovery.EndpointConditions{Ready: ptr.To(true)},
			NodeName:   ptr.To("n1"),
			TargetRef:  &corev1.ObjectReference{Kind: "Pod", Name: "web-a", Namespace: "default"},
		}},
		Ports: []discovery.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080)}},
	}
}

// client is the fake clientset with the authorizer's reactor.
func (c *cluster) client() API {
	cs := fake.NewClientset(c.objects...)
	cs.PrependReactor("create", "selfsubjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		sar := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SelfSubjectAccessReview)
		ra := sar.Spec.ResourceAttributes
		key := ra.Verb + " " + ra.Resource
		if ra.Group != "" {
			key += "." + ra.Group
		}
		sar.Status.Allowed = !c.denied[key]
		return true, sar, nil
	})
	return kubefake.New(cs)
}

// realClient is the client `run` builds, on cfg.
func realClient(t *testing.T, cfg *rest.Config) API {
	t.Helper()
	client, err := kube.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return client
}

func (c *cluster) healthzPort(t *testing.T) string {
	_, port, err := net.SplitHostPort(c.healthz.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// settings parses run's flags with HAProxy's command on a configuration
// file holding cfg; HAProxy's binary is absent, so `haproxy -c` is skipped.
func settings(t *testing.T, cfg string, flags ...string) conf.Settings {
	t.Helper()
	file := filepath.Join(t.TempDir(), "haproxy.cfg")
	if err := os.WriteFile(file, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := conf.Parse(append(flags, "--", "haproxy-not-installed-here", "-f", file), nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (c *cluster) run(t *testing.T, s conf.Settings) Report {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := Run(ctx, Input{Settings: s, Getenv: func(k string) string { return c.env[k] }, Client: c.client()})
	var b bytes.Buffer
	_ = r.WriteText(&b)
	t.Logf("report:\n%s", b.String())
	return r
}

func (c *cluster) kubeProxy(t *testing.T, cfg string) conf.Settings {
	return settings(t, cfg, "--routing", "kube-proxy", "--kube-proxy-healthz-port", c.healthzPort(t))
}

// find returns the rows of area whose subject contains subject.
func find(r Report, area, subject string) []Row {
	var out []Row
	for _, row := range r.Rows {
		if row.Area == area && strings.Contains(row.Subject, subject) {
			out = append(out, row)
		}
	}
	return out
}

// want asserts one row of area and subject with status st whose detail or
// fix contains text.
func want(t *testing.T, r Report, area, subject string, st Status, text string) {
	t.Helper()
	for _, row := range find(r, area, subject) {
		if row.Status == st && strings.Contains(row.Detail+" "+row.Fix, text) {
			return
		}
	}
	t.Errorf("no %s row %s %q containing %q; rows of the area: %+v", st, area, subject, text, find(r, area, ""))
}

// A pod set up as the deploy overlays set it up: every row OK or skipped.
func TestRun_AllOK(t *testing.T) {
	c := newCluster(t)
	r := c.run(t, c.kubeProxy(t, gracefulCfg))
	if code := r.ExitCode(); code != 0 {
		t.Errorf("exit code %d, want 0", code)
	}
	want(t, r, AreaConfig, "frontend web", OK, "graceful")
	want(t, r, AreaSettings, "grace period", OK, "30s")
	want(t, r, AreaIdentity, "pod default/web-a", OK, "match the pod")
	want(t, r, AreaGrants, "watch endpointslices.discovery.k8s.io", OK, "allowed")
	want(t, r, AreaGrants, "list nodes", OK, "allowed in the cluster")
	want(t, r, AreaPaths, "default/web (IPv4)", OK, "endpoint ready")
	want(t, r, AreaKubeProxy, "node n1", OK, "IPv4 last sync 3s ago")
	if n := len(find(r, AreaGrants, "")); n != len(grants) {
		t.Errorf("%d grant rows in kube-proxy mode, want %d", n, len(grants))
	}
}

// A missing grant is a FAIL naming the verb and the resource, with the
// overlay that grants it.
func TestRun_MissingGrant(t *testing.T) {
	c := newCluster(t)
	c.denied["watch endpointslices.discovery.k8s.io"] = true
	c.denied["list nodes"] = true
	c.denied["create events.events.k8s.io"] = true
	r := c.run(t, c.kubeProxy(t, gracefulCfg))
	if code := r.ExitCode(); code != 3 {
		t.Errorf("exit code %d, want 3", code)
	}
	want(t, r, AreaGrants, "watch endpointslices.discovery.k8s.io", Fail, "grant watch endpointslices.discovery.k8s.io to the pod's service account (deploy/overlays/endpointslices/rbac.yaml)")
	want(t, r, AreaGrants, "list nodes", Fail, "deploy/overlays/kube-proxy/nodes-rbac.yaml")
	want(t, r, AreaGrants, "create events.events.k8s.io", Warn, "the drain is unaffected")
	want(t, r, AreaGrants, "list endpointslices", OK, "allowed")
}

// Paths kube-proxy does not carry are named as a drain names them: a
// headless Service listing the pod, the pod's hostPort.
func TestRun_UnobservedPaths(t *testing.T) {
	c := newCluster(t)
	c.objects = append(c.objects,
		service("db", corev1.ClusterIPNone, map[string]string{corev1.IsHeadlessService: ""}),
		slice("db-1", "db", map[string]string{corev1.IsHeadlessService: ""}))
	pod := c.objects[0].(*corev1.Pod)
	pod.Spec.Containers = []corev1.Container{{Name: "haproxy", Ports: []corev1.ContainerPort{{ContainerPort: 8080, HostPort: 80}}}}
	r := c.run(t, c.kubeProxy(t, gracefulCfg))
	if code := r.ExitCode(); code != 1 {
		t.Errorf("exit code %d, want 1", code)
	}
	want(t, r, AreaPaths, "default/db", Warn, "headless Service: DNS clients hold the pod's IP")
	want(t, r, AreaPaths, "hostPort 80/TCP", Warn, "the node's port reaches the pod without kube-proxy")
	want(t, r, AreaPaths, "default/web (IPv4)", OK, "endpoint ready")
	if rows := find(r, AreaPaths, "db (IPv4)"); len(rows) > 0 {
		t.Errorf("headless Service counted as an observed path: %+v", rows)
	}
}

// A node whose healthz cannot be reached, or answers without per-family
// status, is a WARN naming the node; the reachable one stays OK.
func TestRun_KubeProxyUnreachable(t *testing.T) {
	c := newCluster(t)
	old, err := os.ReadFile("../routing/testdata/healthz/pre-1.33.json")
	if err != nil {
		t.Fatal(err)
	}
	oldProxy := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write(old) }))
	defer oldProxy.Close()
	// n3 answers on another loopback address at the same port as n1.
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.3", c.healthzPort(t)))
	if err != nil {
		t.Fatal(err)
	}
	oldProxy.Listener.Close()
	oldProxy.Listener = l
	oldProxy.Start()
	c.objects = append(c.objects, node("n2", "127.0.0.2"), node("n3", "127.0.0.3"), node("n4", ""))
	r := c.run(t, c.kubeProxy(t, gracefulCfg))
	if code := r.ExitCode(); code != 1 {
		t.Errorf("exit code %d, want 1", code)
	}
	want(t, r, AreaKubeProxy, "node n1", OK, "IPv4 last sync")
	want(t, r, AreaKubeProxy, "node n2", Warn, "unreachable")
	want(t, r, AreaKubeProxy, "node n3", Warn, "no per-family status")
	want(t, r, AreaKubeProxy, "node n4", Warn, "no InternalIP")
}

// NODE_NAME and POD_IPS that are not the pod's, and a grace period that
// is not the pod's, are named with the fix.
func TestRun_IdentityAndGrace(t *testing.T) {
	c := newCluster(t)
	c.env["NODE_NAME"] = "n9"
	c.env["POD_IPS"] = "10.0.0.6"
	r := c.run(t, settings(t, gracefulCfg, "--routing", "endpointslices", "--grace-period", "60s"))
	if code := r.ExitCode(); code != 3 {
		t.Errorf("exit code %d, want 3", code)
	}
	want(t, r, AreaIdentity, "NODE_NAME", Fail, `the pod runs on node "n1"`)
	want(t, r, AreaIdentity, "POD_IPS", Fail, "the pod's IPs are 10.0.0.5")
	want(t, r, AreaSettings, "grace period", Fail, "set --grace-period (HAPSUPER_GRACE_PERIOD) to 30s")
	want(t, r, AreaKubeProxy, "-", Skip, "routing endpointslices")
	if rows := find(r, AreaGrants, "list nodes"); len(rows) > 0 {
		t.Errorf("endpointslices mode checked the kube-proxy grant: %+v", rows)
	}

	c = newCluster(t)
	c.env["POD_NAME"] = "web-z"
	r = c.run(t, settings(t, gracefulCfg, "--routing", "endpointslices", "--grace-period", "20s"))
	want(t, r, AreaIdentity, "pod default/web-z", Fail, "no such pod")

	c = newCluster(t)
	r = c.run(t, settings(t, gracefulCfg, "--routing", "endpointslices", "--grace-period", "20s"))
	want(t, r, AreaSettings, "grace period", Warn, "shorter than the pod's terminationGracePeriodSeconds 30s")
	delete(c.env, "POD_IPS")
	r = c.run(t, settings(t, gracefulCfg, "--routing", "endpointslices"))
	want(t, r, AreaIdentity, "downward API", Fail, "POD_IPS (valueFrom.fieldRef.fieldPath: status.podIPs)")
}

// A pod that no Service's slice lists gives a drain nothing to observe.
func TestRun_NotListed(t *testing.T) {
	c := newCluster(t)
	c.objects = c.objects[:3]
	r := c.run(t, settings(t, gracefulCfg, "--routing", "endpointslices"))
	want(t, r, AreaPaths, "-", Warn, "no EndpointSlice of a Service kube-proxy programs lists the pod")
}

// Routing off skips every Kubernetes row; the configuration decides.
func TestRun_RoutingOff(t *testing.T) {
	s := settings(t, gracefulCfg, "--routing", "off")
	r := Run(context.Background(), NewInput(s, func(string) string { return "" }))
	if code := r.ExitCode(); code != 0 {
		t.Errorf("exit code %d, want 0: %+v", code, r.Rows)
	}
	for _, a := range clusterAreas {
		want(t, r, a, "-", Skip, "skipped: routing off")
	}
	want(t, r, AreaConfig, "haproxy -c", Skip, `no HAProxy binary "haproxy-not-installed-here"`)
}

// auto without credentials runs off: a WARN that says so. An explicit
// mode without them cannot run: FAIL.
func TestRun_NoCredentials(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	for _, tc := range []struct {
		mode string
		st   Status
		text string
	}{
		{"auto", Warn, "--routing auto runs with routing off"},
		{"kube-proxy", Fail, "--routing kube-proxy needs in-cluster credentials or --kubeconfig"},
	} {
		r := Run(context.Background(), NewInput(settings(t, gracefulCfg, "--routing", tc.mode), func(string) string { return "" }))
		want(t, r, AreaRouting, "credentials", tc.st, tc.text)
		want(t, r, AreaGrants, "-", Skip, "no credentials")
	}
}

// An apiserver that does not answer is a FAIL row within the timeout, not a
// hang.
func TestRun_APIServerUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens: connections are refused
	client := realClient(t, &rest.Config{Host: "https://" + addr, Timeout: apiTimeout})
	c := newCluster(t)
	start := time.Now()
	r := Run(context.Background(), Input{Settings: settings(t, gracefulCfg, "--routing", "auto"),
		Getenv: func(k string) string { return c.env[k] }, Client: client})
	if took := time.Since(start); took > 2*apiTimeout {
		t.Errorf("check took %v with the apiserver down, want at most %v", took, 2*apiTimeout)
	}
	if code := r.ExitCode(); code != 3 {
		t.Errorf("exit code %d, want 3", code)
	}
	want(t, r, AreaRouting, "apiserver", Fail, "unreachable")
	want(t, r, AreaPaths, "-", Skip, "apiserver unreachable")
}

// An apiserver that accepts connections and never answers is a FAIL row
// once the API timeout has passed, not a hang.
func TestRun_APIServerSilent(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	done := make(chan struct{})
	defer close(done)
	go func() { // accepts and holds every connection until the test ends
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			go func() { <-done; conn.Close() }()
		}
	}()
	client := realClient(t, &rest.Config{Host: "https://" + l.Addr().String(), Timeout: apiTimeout})
	c := newCluster(t)
	start := time.Now()
	r := Run(context.Background(), Input{Settings: settings(t, gracefulCfg, "--routing", "endpointslices"),
		Getenv: func(k string) string { return c.env[k] }, Client: client})
	if took := time.Since(start); took > apiTimeout+2*time.Second {
		t.Errorf("check took %v against a silent apiserver, want about %v", took, apiTimeout)
	}
	want(t, r, AreaRouting, "apiserver", Fail, "unreachable")
	if code := r.ExitCode(); code != 3 {
		t.Errorf("exit code %d, want 3", code)
	}
}

// The frontend without idle-close-on-response is named; an ignored
// frontend says so.
func TestRun_ConfigRows(t *testing.T) {
	cfg := gracefulCfg + `
frontend api
    bind :8081
    no option idle-close-on-response
    http-request return status 200

frontend probes
    bind :8082
    no option idle-close-on-response
    http-request return status 200
`
	r := Run(context.Background(), NewInput(settings(t, cfg, "--routing", "off", "--ignore-frontends", "probes"), nil))
	want(t, r, AreaConfig, "frontend api", Warn, "add `option idle-close-on-response` to defaults or frontend api")
	want(t, r, AreaConfig, "frontend probes", OK, "ignored (--ignore-frontends): soft stop closes idle keep-alive connections")
	want(t, r, AreaConfig, "frontend web", OK, "http, counted")
	if code := r.ExitCode(); code != 1 {
		t.Errorf("exit code %d, want 1", code)
	}

	r = Run(context.Background(), NewInput(settings(t, "global\n    hard-stop-after 1m\n"+gracefulCfg, "--routing", "off"), nil))
	want(t, r, AreaConfig, "hard-stop-after", Warn, "longer than the stop budget 28s")
}

// haproxy -c runs the real binary: a keyword it does not know is a FAIL
// with HAProxy's own words.
func TestHAProxyParse(t *testing.T) {
	const haproxy = "/usr/sbin/haproxy"
	if _, err := os.Stat(haproxy); err != nil {
		t.Fatalf("%s: %v (install Debian's haproxy; .ci/run does)", haproxy, err)
	}
	dir := t.TempDir()
	good, bad := filepath.Join(dir, "good.cfg"), filepath.Join(dir, "bad.cfg")
	for f, cfg := range map[string]string{good: gracefulCfg, bad: gracefulCfg + "    bogus-keyword\n"} {
		if err := os.WriteFile(f, []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var r Report
	haproxyParse(context.Background(), &r, []string{haproxy, "-f", good})
	haproxyParse(context.Background(), &r, []string{haproxy, "-f", bad})
	if len(r.Rows) != 2 || r.Rows[0].Status != OK || r.Rows[1].Status != Fail || !strings.Contains(r.Rows[1].Detail, "unknown keyword 'bogus-keyword'") {
		t.Errorf("rows %+v: want OK, then FAIL naming the unknown keyword", r.Rows)
	}
}

// The exit code follows the worst row; JSON carries the rows, the status
// and the exit code.
func TestReport(t *testing.T) {
	for _, tc := range []struct {
		rows []Status
		code int
	}{
		{nil, 0}, {[]Status{OK, Skip}, 0}, {[]Status{OK, Warn}, 1}, {[]Status{Warn, Fail, OK}, 3},
	} {
		var r Report
		for i, st := range tc.rows {
			r.add("a", strconv.Itoa(i), st, "d", "")
		}
		if got := r.ExitCode(); got != tc.code {
			t.Errorf("rows %v: exit %d, want %d", tc.rows, got, tc.code)
		}
		var b bytes.Buffer
		if err := r.WriteJSON(&b); err != nil {
			t.Fatal(err)
		}
		var got struct {
			Status Status `json:"status"`
			Exit   int    `json:"exit"`
			Rows   []Row  `json:"rows"`
		}
		if err := json.Unmarshal(b.Bytes(), &got); err != nil || got.Exit != tc.code || len(got.Rows) != len(tc.rows) || got.Rows == nil {
			t.Errorf("rows %v: JSON %s (%v)", tc.rows, b.String(), err)
		}
	}
}

// auto says what it picks and why: kube-proxy when nodes can be listed and
// this node's healthz answers; endpointslices (a WARN) otherwise, and then
// neither the node grant nor kube-proxy is checked.
func TestRun_AutoPicks(t *testing.T) {
	c := newCluster(t)
	r := c.run(t, settings(t, gracefulCfg, "--routing", "auto", "--kube-proxy-healthz-port", c.healthzPort(t)))
	want(t, r, AreaRouting, "mode", OK, "auto picks kube-proxy")
	want(t, r, AreaKubeProxy, "node n1", OK, "IPv4 last sync")
	if code := r.ExitCode(); code != 0 {
		t.Errorf("exit code %d, want 0", code)
	}

	c.healthz.Close() // this node's kube-proxy does not answer
	r = c.run(t, settings(t, gracefulCfg, "--routing", "auto", "--kube-proxy-healthz-port", c.healthzPort(t)))
	want(t, r, AreaRouting, "mode", Warn, "auto picks endpointslices: kube-proxy healthz of node n1")
	want(t, r, AreaKubeProxy, "-", Skip, "routing endpointslices")
	if rows := find(r, AreaGrants, "list nodes"); len(rows) > 0 {
		t.Errorf("auto on endpointslices checked the node grant: %+v", rows)
	}
}
