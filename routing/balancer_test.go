package routing

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/hapsuper/hapsuper/drain"

	"github.com/hapsuper/hapsuper/routing/judge"
)

func TestHealthCheckWindow(t *testing.T) {
	for _, tt := range []struct {
		name   string
		ann    map[string]string
		flag   time.Duration
		want   time.Duration
		source []string
	}{
		{"nothing", nil, 0, 0, []string{"unknown", judge.WindowSetting}},
		{"flag", nil, 3 * time.Second, 3 * time.Second, []string{judge.WindowSetting}},
		{"AWS", map[string]string{judge.AnnotationAWSInterval: "10", judge.AnnotationAWSThreshold: "3"}, 0, 40 * time.Second,
			[]string{"AWS annotations: interval 10s × threshold 3 + 10s"}},
		{"AWS over the flag", map[string]string{judge.AnnotationAWSInterval: "5", judge.AnnotationAWSThreshold: "2"}, time.Minute, 15 * time.Second,
			[]string{"AWS annotations"}},
		{"Azure", map[string]string{judge.AnnotationAzureInterval: "5", judge.AnnotationAzureThreshold: "2"}, 0, 15 * time.Second,
			[]string{"Azure annotations"}},
		{"AWS interval only", map[string]string{judge.AnnotationAWSInterval: "10"}, 0, 0,
			[]string{"AWS annotations give only one of interval and threshold", "unknown"}},
		{"AWS interval only, flag", map[string]string{judge.AnnotationAWSInterval: "10"}, 7 * time.Second, 7 * time.Second,
			[]string{judge.WindowSetting, "only one of"}},
		{"not numbers", map[string]string{judge.AnnotationAWSInterval: "10s", judge.AnnotationAWSThreshold: "x"}, 0, 0,
			[]string{"are not whole seconds", "unknown"}},
		{"zero", map[string]string{judge.AnnotationAWSInterval: "0", judge.AnnotationAWSThreshold: "2"}, 0, 0, []string{"not whole seconds"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, src := judge.HealthCheckWindow(tt.ann, tt.flag)
			if got != tt.want {
				t.Errorf("window %v, want %v (%s)", got, tt.want, src)
			}
			for _, w := range tt.source {
				if !strings.Contains(src, w) {
					t.Errorf("source %q does not say %q", src, w)
				}
			}
		})
	}
}

func TestReadServiceHealth(t *testing.T) {
	body := func(ns, name string, n int) []byte {
		return fmt.Appendf(nil, `{"service":{"namespace":%q,"name":%q},"localEndpoints":%d,"serviceProxyHealthy":true}`, ns, name, n)
	}
	for _, tt := range []struct {
		name    string
		status  int
		body    []byte
		failing bool
		answer  string
	}{
		{"healthy", 200, body("default", "web", 1), false, "HTTP 200, localEndpoints 1"},
		{"failing", 503, body("default", "web", 0), true, "HTTP 503, localEndpoints 0"},
		// kube-proxy unhealthy with a ready local endpoint: it has not
		// programmed this pod's change yet.
		{"unhealthy proxy, endpoint counted", 503, body("default", "web", 1), false, "localEndpoints 1"},
		{"another Service", 503, body("default", "api", 0), false, "for Service default/api, not default/web"},
		{"not JSON", 503, []byte("<html>"), false, "not kube-proxy's service health check"},
		{"no count", 503, []byte(`{"service":{"namespace":"default","name":"web"}}`), false, "not kube-proxy's"},
		{"long name", 503, body("default", strings.Repeat("x", 5000), 0), false, "…"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			failing, answer := judge.ReadServiceHealth(tt.status, tt.body, "default", "web")
			if failing != tt.failing || !strings.Contains(answer, tt.answer) || len(answer) > 300 {
				t.Errorf("judge.ReadServiceHealth = %v, %q; want %v, %q", failing, answer, tt.failing, tt.answer)
			}
		})
	}
}

// serviceCheck is kube-proxy's health check of one Service on one node.
type serviceCheck struct {
	mu       sync.Mutex
	local    int  // ready local endpoints
	refuse   bool // answer nothing sensible: a bare 500
	requests int
}

func (c *serviceCheck) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.requests++
	if r.URL.Path != "/" {
		http.NotFound(w, r)
		return
	}
	if c.refuse {
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	if c.local == 0 {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	fmt.Fprintf(w, `{"service":{"namespace":"default","name":"web"},"localEndpoints":%d,"serviceProxyHealthy":true}`, c.local)
}

func (c *serviceCheck) set(edit func(*serviceCheck)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	edit(c)
}

// lbScenario: web is a LoadBalancer Service with externalTrafficPolicy
// Local and healthCheckNodePort 31000; web-0 (on n1, at 10.0.0.1) is its
// only pod on n1 and turns serving-terminating at R while web-1 on n2
// stays ready. The stop is requested at R. The node's health check answers
// as check says.
type lbScenario struct {
	*testObserver
	t     *testing.T
	check *serviceCheck
	R     time.Time
}

func newLBScenario(t *testing.T, cfg Config, ann map[string]string) *lbScenario {
	t.Helper()
	return newLBScenarioOn(t, cfg, ann, nil)
}

// newLBScenarioOn is newLBScenario on an API client of the test's.
func newLBScenarioOn(t *testing.T, cfg Config, ann map[string]string, client *fake.Clientset) *lbScenario {
	t.Helper()
	if cfg.Mode == "" {
		cfg.Mode = ModeEndpointSlices
	}
	s := &lbScenario{testObserver: newTestObserver(t, cfg, client), t: t, check: &serviceCheck{local: 1}}
	srv := httptest.NewServer(s.check)
	t.Cleanup(srv.Close)
	s.routes["10.0.0.1:31000"] = srv.Listener.Addr().String()
	lb := service("web", loadBalancerLocal, func(svc *corev1.Service) {
		svc.Spec.HealthCheckNodePort = 31000
		svc.Annotations = ann
	})
	s.apply(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: "default"}, Status: corev1.PodStatus{HostIP: "10.0.0.1"}},
		lb, v4("web-a", "web", mine(readyC), peer("n2", readyC)))
	s.clk.Step(10 * time.Second)
	s.R = s.clk.Now()
	s.apply(v4("web-a", "web", mine(servingTermC), peer("n2", readyC)))
	s.StopRequested(s.R)
	return s
}

// round moves the clock to R+off and asks the health check once.
func (s *lbScenario) round(off time.Duration) drain.Routing {
	if d := s.R.Add(off).Sub(s.clk.Now()); d > 0 {
		s.clk.Step(d)
	}
	s.balancerRound(s.t.Context())
	return s.Routing(s.clk.Now())
}

// The external path is pending until the node's check has failed for the
// window; then the verdict is withdrawn with Balancer set, naming the
// Service, the check, the window and where it came from.
func TestBalancerWindowFromTheFlag(t *testing.T) {
	s := newLBScenario(t, Config{LBHealthCheckWindow: 3 * time.Second}, nil)
	expect(t, s.round(0), drain.RoutingPending, "default/web: health check http://10.0.0.1:31000/ not failing (HTTP 200, localEndpoints 1)",
		"external traffic to node n1")
	s.check.set(func(c *serviceCheck) { c.local = 0 }) // kube-proxy programmed the change
	expect(t, s.round(500*ms), drain.RoutingPending, "failing for 0.0s", "within 3s ("+judge.WindowSetting+"): 3s more")
	expect(t, s.round(3400*ms), drain.RoutingPending, "failing for 2.9s", "100ms more")
	got := s.round(3500 * ms)
	expect(t, got, drain.RoutingWithdrawn, "withdrawn in the API", "kube-proxy not observed",
		"external path via node n1 withdrawn by the load balancer: default/web: health check http://10.0.0.1:31000/ failing for 3.0s (HTTP 503, localEndpoints 0), window 3s ("+judge.WindowSetting+") passed")
	// endpointslices mode: the cluster path rests on the API alone, so
	// the drain says withdrawn-in-api, not lb-marked-down.
	if !got.APIOnly || !got.Balancer {
		t.Errorf("APIOnly %v Balancer %v, want both", got.APIOnly, got.Balancer)
	}
}

// Unknown window: pending for as long as it lasts, and the detail names
// the setting that would end it.
func TestBalancerWindowUnknown(t *testing.T) {
	s := newLBScenario(t, Config{}, nil)
	s.check.set(func(c *serviceCheck) { c.local = 0 })
	for _, off := range []time.Duration{0, 10 * time.Second, 60 * time.Second} {
		expect(t, s.round(off), drain.RoutingPending, "the load balancer's window is unknown: set "+judge.WindowSetting)
	}
}

// The Service's annotations give the window (and win over the flag).
func TestBalancerWindowFromAnnotations(t *testing.T) {
	s := newLBScenario(t, Config{LBHealthCheckWindow: time.Minute},
		map[string]string{judge.AnnotationAWSInterval: "1", judge.AnnotationAWSThreshold: "2"})
	s.check.set(func(c *serviceCheck) { c.local = 0 })
	expect(t, s.round(0), drain.RoutingPending, "within 3s (AWS annotations: interval 1s × threshold 2 + 1s)")
	expect(t, s.round(3*time.Second), drain.RoutingWithdrawn, "window 3s (AWS annotations")
}

// The window counts from the first of an unbroken run of failing answers:
// an answer that is not a failure, or none, starts it again.
func TestBalancerRunBroken(t *testing.T) {
	s := newLBScenario(t, Config{LBHealthCheckWindow: 2 * time.Second}, nil)
	s.check.set(func(c *serviceCheck) { c.local = 0 })
	s.round(0)
	s.check.set(func(c *serviceCheck) { c.refuse = true })
	expect(t, s.round(time.Second), drain.RoutingPending, "not failing (HTTP 500, not kube-proxy's service health check)")
	s.check.set(func(c *serviceCheck) { c.refuse = false })
	expect(t, s.round(1500*ms), drain.RoutingPending, "failing for 0.0s")
	expect(t, s.round(3400*ms), drain.RoutingPending, "100ms more")
	expect(t, s.round(3500*ms), drain.RoutingWithdrawn, "failing for 2.0s")
	// Unreachable: no answer is no failure.
	s.routes["10.0.0.1:31000"] = closedAddr(t)
	s.http.CloseIdleConnections()
	expect(t, s.round(4*time.Second), drain.RoutingPending, "not failing (no answer: ")
}

// In kube-proxy mode, a confirmed cluster path with the external path
// judged by the balancer gives a withdrawn verdict with Balancer and not
// APIOnly: the drain ends lb-marked-down. Until kube-proxy confirms, the
// balancer's window having passed changes nothing.
func TestBalancerKubeProxyMode(t *testing.T) {
	client := fake.NewClientset()
	for _, n := range []*corev1.Node{node("n1", "10.0.0.1"), node("n2", "10.0.0.2")} {
		if err := client.Tracker().Add(n); err != nil {
			t.Fatal(err)
		}
	}
	s := newLBScenarioOn(t, Config{Mode: ModeKubeProxy, LBHealthCheckWindow: 500 * ms, Concurrency: 1}, nil, client)
	for _, addr := range []string{"10.0.0.1:10256", "10.0.0.2:10256"} {
		// The withdrawal sync completes 30 ms after R: confirmed at
		// R+1.53s (TestConfirmPlainDelete).
		p := &fakeProxy{clk: s.clk, syncs: []time.Time{s.R.Add(-5 * time.Second), s.R.Add(30 * ms)}}
		srv := httptest.NewServer(p)
		t.Cleanup(srv.Close)
		s.routes[addr] = srv.Listener.Addr().String()
	}
	s.check.set(func(c *serviceCheck) { c.local = 0 })
	withdrawnAt := time.Duration(-1)
	for off := time.Duration(0); off <= 3*time.Second; off += 50 * ms {
		if d := s.R.Add(off).Sub(s.clk.Now()); d > 0 {
			s.clk.Step(d)
		}
		s.confirmRound(t.Context())
		s.balancerRound(t.Context())
		got := s.Routing(s.clk.Now())
		if got.State == drain.RoutingWithdrawn {
			if !got.Balancer || got.APIOnly {
				t.Fatalf("withdrawn with Balancer %v APIOnly %v, want Balancer only: %s", got.Balancer, got.APIOnly, got.Detail())
			}
			expect(t, got, drain.RoutingWithdrawn, "confirmed by kube-proxy on 2 nodes", "withdrawn by the load balancer")
			withdrawnAt = off
			break
		}
		if off >= time.Second && !strings.Contains(got.Detail(), "kube-proxy not confirmed") {
			t.Fatalf("at R+%v: %s %q, want pending on kube-proxy", off, got.State, got.Detail())
		}
	}
	between(t, "withdrawn", withdrawnAt, 1500*ms, 1600*ms)
}

// A Service without healthCheckNodePort (a NodePort Service) keeps the old
// rule: pending, saying nothing tells a load balancer to stop.
func TestBalancerNoHealthCheckNodePort(t *testing.T) {
	o := newTestObserver(t, Config{Mode: ModeEndpointSlices, LBHealthCheckWindow: time.Second}, nil)
	o.apply(service("web", loadBalancerLocal), v4("web-a", "web", mine(servingTermC), peer("n2", readyC)))
	o.StopRequested(o.clk.Now())
	expect(t, o.Routing(o.clk.Now()), drain.RoutingPending, "externalTrafficPolicy Local falls back to it", "no healthCheckNodePort")
}
