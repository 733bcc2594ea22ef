package routing

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/hapsuper/hapsuper/routing/kube/kubefake"

	"github.com/hapsuper/hapsuper/routing/judge"
)

// A survey judges what the observer judges: the same paths with the same
// verdicts, and the same paths not observed, for the same objects.
func TestSurveyPodAgreesWithObserver(t *testing.T) {
	db := v4("db-a", "db", mine(readyC))
	db.Labels[judge.LabelHeadless] = ""
	hostPort := pod(func(p *corev1.Pod) {
		p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: 80}}
	})
	tests := []struct {
		name       string
		objs       []runtime.Object
		paths      []string // "service family withdrawn why"
		unobserved []string
	}{
		{"ready, dual-stack", []runtime.Object{service("web"), v4("web-a", "web", mine(readyC)), v6("web-b", "web", mine6(readyC))},
			[]string{"default/web IPv4 false endpoint ready", "default/web IPv6 false endpoint ready"}, nil},
		{"serving-terminating, peer ready", []runtime.Object{service("web"), v4("web-a", "web", mine(servingTermC), peer("n2", readyC))},
			[]string{"default/web IPv4 true endpoint not ready, other endpoints ready"}, nil},
		{"headless and hostPort", []runtime.Object{service("web"), v4("web-a", "web", mine(readyC)), service("db", headless), db, hostPort},
			[]string{"default/web IPv4 false endpoint ready"},
			[]string{"hostPort 80/TCP: the node's port reaches the pod without kube-proxy", "default/db: headless Service: DNS clients hold the pod's IP"}},
		{"NLB IP targets", []runtime.Object{service("web", func(s *corev1.Service) {
			s.Annotations = map[string]string{judge.AnnotationNLBTarget: "ip"}
		}), v4("web-a", "web", mine(readyC))},
			[]string{"default/web IPv4 false endpoint ready"},
			[]string{"default/web: annotation " + judge.AnnotationNLBTarget + ": ip: a load balancer targets pod IPs"}},
		{"not listed", []runtime.Object{service("web"), v4("web-a", "web", peer("n2", readyC))}, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var p *corev1.Pod
			for _, o := range tt.objs {
				if po, ok := o.(*corev1.Pod); ok {
					p = po
				}
			}
			if p == nil {
				p = pod(func(*corev1.Pod) {})
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			sv, err := SurveyPod(ctx, kubefake.New(fake.NewClientset(tt.objs...)), me, p, 0)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, p := range sv.Paths {
				got = append(got, fmt.Sprintf("%s %s %v %s", p.Service, p.Family, p.Withdrawn, p.Why))
				// Every case's IPv4 slice is web-a, its IPv6 one web-b.
				if want := map[string]string{"IPv4": "web-a", "IPv6": "web-b"}[p.Family]; !slices.Equal(p.Slices, []string{want}) {
					t.Errorf("%s %s: slices %q, want [%s]", p.Service, p.Family, p.Slices, want)
				}
			}
			if !slices.Equal(got, tt.paths) {
				t.Errorf("paths %q, want %q", got, tt.paths)
			}
			if !slices.Equal(sv.Unobserved, tt.unobserved) {
				t.Errorf("not observed %q, want %q", sv.Unobserved, tt.unobserved)
			}

			// The observer, fed the same objects as its informers would.
			o := newTestObserver(t, Config{Mode: ModeEndpointSlices}, nil)
			o.apply(p)
			for _, obj := range tt.objs {
				o.apply(obj)
			}
			o.mu.Lock()
			f := o.facts()
			unobserved := judge.Unobserved(&f)
			var paths []string
			for k, p := range o.watch.paths {
				paths = append(paths, fmt.Sprintf("default/%s %s %v %s", k.Service, k.Family, p.Withdrawn, p.Why))
			}
			o.mu.Unlock()
			slices.Sort(paths)
			if !slices.Equal(paths, got) || !slices.Equal(unobserved, sv.Unobserved) {
				t.Errorf("observer: paths %q, not observed %q; survey: %q, %q", paths, unobserved, got, sv.Unobserved)
			}
		})
	}
}

// ProbeKubeProxies asks every listed node once: per-family ages from an
// answering kube-proxy, the failure of one that refuses, a node without
// address.
func TestProbeKubeProxies(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		now := time.Now().UTC()
		fmt.Fprintf(w, `{"currentTime":%q,"status":{"IPv4":{"lastUpdated":%q,"healthy":true},"IPv6":{"lastUpdated":%q,"healthy":false}}}`,
			now.Format(time.RFC3339Nano), now.Add(-2*time.Second).Format(time.RFC3339Nano), now.Add(-5*time.Second).Format(time.RFC3339Nano))
	}))
	defer srv.Close()
	_, portS, _ := net.SplitHostPort(srv.Listener.Addr().String())
	port, _ := strconv.Atoi(portS)
	client := fake.NewClientset(node("n1", "127.0.0.1"), node("n2", "127.0.0.2"), &corev1.Node{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got, err := ProbeKubeProxies(ctx, kubefake.New(client), port)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("%d nodes, want 3: %+v", len(got), got)
	}
	noAddr, n1, n2 := got[0], got[1], got[2]
	if noAddr.Err != "node has no InternalIP to reach kube-proxy at" {
		t.Errorf("node without address: %+v", noAddr)
	}
	if n1.Err != "" || len(n1.Families) != 2 || n1.Families[0].Family != string(discovery.AddressTypeIPv4) ||
		n1.Families[0].Age != 2*time.Second || !n1.Families[0].Healthy || n1.Families[1].Age != 5*time.Second || n1.Families[1].Healthy {
		t.Errorf("n1: %+v, want IPv4 2s healthy and IPv6 5s unhealthy", n1)
	}
	if !strings.Contains(n2.Err, "unreachable") || n2.Pending {
		t.Errorf("n2 (refused): %+v, want unreachable, not pending", n2)
	}
}

// A LoadBalancer Service with externalTrafficPolicy Local: the survey asks
// the node's health check at the pod's hostIP and gives the window; with
// another ready pod on the node it says so instead.
func TestSurveyExternal(t *testing.T) {
	check := &serviceCheck{local: 1}
	srv := httptest.NewServer(check)
	t.Cleanup(srv.Close)
	_, portStr, _ := net.SplitHostPort(srv.Listener.Addr().String())
	port, _ := strconv.Atoi(portStr)
	lb := service("web", loadBalancerLocal, func(s *corev1.Service) {
		s.Spec.HealthCheckNodePort = int32(port)
		s.Annotations = map[string]string{judge.AnnotationAzureInterval: "5", judge.AnnotationAzureThreshold: "2"}
	})
	p := pod(func(p *corev1.Pod) { p.Status.HostIP = "127.0.0.1" })
	for _, tt := range []struct {
		name   string
		slice  any
		window time.Duration
		want   SurveyExternal
	}{
		{"only pod on the node", v4("web-a", "web", mine(readyC), peer("n2", readyC)), 0, SurveyExternal{
			Service: "default/web", HealthCheckNodePort: int32(port), URL: "http://127.0.0.1:" + portStr + "/",
			Answer: "HTTP 200, localEndpoints 1", Reachable: true, Window: 15 * time.Second,
			WindowSource: "Azure annotations: interval 5s × threshold 2 + 5s"}},
		{"another ready pod on the node", v4("web-a", "web", mine(readyC), peer("n1", readyC)), 0, SurveyExternal{
			Service: "default/web", OtherReadyOnNode: true, HealthCheckNodePort: int32(port), URL: "http://127.0.0.1:" + portStr + "/",
			Answer: "HTTP 200, localEndpoints 1", Reachable: true, Window: 15 * time.Second,
			WindowSource: "Azure annotations: interval 5s × threshold 2 + 5s"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			defer cancel()
			sv, err := SurveyPod(ctx, kubefake.New(fake.NewClientset(lb, tt.slice.(runtime.Object), p)), me, p, tt.window)
			if err != nil {
				t.Fatal(err)
			}
			if len(sv.External) != 1 || sv.External[0] != tt.want {
				t.Fatalf("External = %+v\nwant %+v", sv.External, tt.want)
			}
		})
	}
	// Not reachable: said, not taken for a failing check.
	srv.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	sv, err := SurveyPod(ctx, kubefake.New(fake.NewClientset(lb, v4("web-a", "web", mine(readyC), peer("n2", readyC)), p)), me, p, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if e := sv.External; len(e) != 1 || e[0].Reachable || !strings.Contains(e[0].Answer, "unreachable") {
		t.Fatalf("External = %+v, want unreachable", e)
	}
}
