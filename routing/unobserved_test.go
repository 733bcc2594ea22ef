package routing

import (
	"strings"
	"testing"
	"time"

	"github.com/hapsuper/hapsuper/drain"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hapsuper/hapsuper/routing/judge"
)

// pod is this pod's object with edit applied.
func pod(edit func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: me.PodName, Namespace: me.Namespace},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "haproxy"}}}}
	edit(p)
	return p
}

// withdrawnWeb is web withdrawn in the API: this pod serving-terminating,
// its peer ready.
func withdrawnWeb(o *testObserver, edit ...func(*corev1.Service)) {
	o.apply(service("web", edit...), v4("web-a", "web", mine(readyC), peer("n2", readyC)))
	o.clk.Step(ms)
	o.apply(v4("web-a", "web", mine(servingTermC), peer("n2", readyC)))
}

// A path kube-proxy does not carry reaches the pod: the verdict is never
// withdrawn, only unverified, and it names the path.
func TestRoutingUnobservedPaths(t *testing.T) {
	tests := []struct {
		name string
		pod  func(*corev1.Pod)
		svc  func(*corev1.Service)
		want string
	}{
		{"hostNetwork", func(p *corev1.Pod) { p.Spec.HostNetwork = true }, nil,
			"hostNetwork: the node's address reaches the pod without kube-proxy"},
		{"hostPort", func(p *corev1.Pod) {
			p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 8080}, {ContainerPort: 80, HostPort: 80}, {ContainerPort: 53, HostPort: 53, Protocol: corev1.ProtocolUDP}}
		}, nil, "hostPort 80/TCP, 53/UDP: the node's port reaches the pod without kube-proxy"},
		{"AWS load balancer readiness gate", func(p *corev1.Pod) {
			p.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: "target-health.elbv2.k8s.aws/k8s-default-web-0123456789"}}
		}, nil, "readiness gate target-health.elbv2.k8s.aws/k8s-default-web-0123456789: a load balancer targets the pod's IP"},
		{"GKE NEG readiness gate", func(p *corev1.Pod) {
			p.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: "cloud.google.com/load-balancer-neg-ready"}}
		}, nil, "readiness gate cloud.google.com/load-balancer-neg-ready"},
		{"NLB IP targets", nil, func(s *corev1.Service) {
			s.Annotations = map[string]string{"service.beta.kubernetes.io/aws-load-balancer-nlb-target-type": "ip"}
		}, "default/web: annotation service.beta.kubernetes.io/aws-load-balancer-nlb-target-type: ip"},
		{"ALB IP targets", nil, func(s *corev1.Service) {
			s.Annotations = map[string]string{"alb.ingress.kubernetes.io/target-type": "ip"}
		}, "default/web: annotation alb.ingress.kubernetes.io/target-type: ip"},
		{"GKE NEG", nil, func(s *corev1.Service) {
			s.Annotations = map[string]string{"cloud.google.com/neg": `{"ingress": true}`}
		}, `default/web: annotation cloud.google.com/neg: {"ingress": true}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var edit []func(*corev1.Service)
			if tt.svc != nil {
				edit = append(edit, tt.svc)
			}
			o := newTestObserver(t, Config{Mode: ModeEndpointSlices}, nil)
			if tt.pod != nil {
				o.apply(pod(tt.pod))
			}
			withdrawnWeb(o, edit...)
			expect(t, o.Routing(o.clk.Now()), drain.RoutingUnverified, "not observed: "+tt.want)

			// kube-proxy mode, with every node's kube-proxy confirmed.
			s := newScenario(t, Config{})
			if tt.pod != nil {
				s.apply(pod(tt.pod))
			}
			s.apply(service("web", edit...))
			s.syncsAt("n2", 300*ms)
			expect(t, s.round(400*ms), drain.RoutingUnverified, "confirmed by kube-proxy on 1 nodes; not observed: "+tt.want)

			// With the pod's own health check (--lb-check-bind), the
			// balancer's path is observed by the supervisor: withdrawn,
			// the path not named.
			pc := newScenario(t, Config{PodChecked: true})
			if tt.pod != nil {
				pc.apply(pod(tt.pod))
			}
			pc.apply(service("web", edit...))
			pc.syncsAt("n2", 300*ms)
			if got := pc.round(400 * ms); got.State != drain.RoutingWithdrawn || strings.Contains(got.Detail(), tt.want) {
				t.Errorf("PodChecked: routing %s (%s), want withdrawn without %q", got.State, got.Detail(), tt.want)
			}
		})
	}
}

// Load balancer annotations that do not target pod IPs, and gates of other
// controllers, are no path of their own.
func TestRoutingNotUnobserved(t *testing.T) {
	o := newTestObserver(t, Config{Mode: ModeEndpointSlices}, nil)
	o.apply(pod(func(p *corev1.Pod) {
		p.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: "example.com/feature"}}
		p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 8080}}
	}))
	withdrawnWeb(o, func(s *corev1.Service) {
		s.Annotations = map[string]string{
			"service.beta.kubernetes.io/aws-load-balancer-nlb-target-type": "instance",
			"cloud.google.com/neg": `{"ingress": false}`,
		}
	})
	expect(t, o.Routing(o.clk.Now()), drain.RoutingWithdrawn)
}

// Headless Services and Services of another proxy were dropped: their
// slices listing the pod are paths not observed. They stay named after the
// endpoint leaves the slice: DNS clients and other proxies may still hold
// the address.
func TestRoutingUnproxiedServices(t *testing.T) {
	o := newTestObserver(t, Config{Mode: ModeEndpointSlices}, nil)
	withdrawnWeb(o)
	expect(t, o.Routing(o.clk.Now()), drain.RoutingWithdrawn)

	db := v4("db-a", "db", mine(readyC))
	db.Labels[judge.LabelHeadless] = ""
	mesh := v4("mesh-a", "mesh", mine(readyC))
	mesh.Labels[judge.LabelProxyName] = "istio"
	o.apply(service("db", headless), db, service("mesh"), mesh)
	got := o.Routing(o.clk.Now())
	expect(t, got, drain.RoutingUnverified,
		`not observed: default/db: headless Service: DNS clients hold the pod's IP; default/mesh: Service proxied by "istio", not kube-proxy`)
	o.remove(db, mesh)
	expect(t, o.Routing(o.clk.Now()), drain.RoutingUnverified, "default/db: headless Service", "default/mesh: Service proxied")

	// A Service that takes the label of another proxy after its slices
	// listed the pod.
	o = newTestObserver(t, Config{Mode: ModeEndpointSlices}, nil)
	withdrawnWeb(o)
	o.apply(service("web", func(s *corev1.Service) { s.Labels = map[string]string{judge.LabelProxyName: "cilium"} }))
	expect(t, o.Routing(o.clk.Now()), drain.RoutingUnverified, `default/web: Service proxied by "cilium", not kube-proxy`)

	// Alone, without a kube-proxy path.
	o = newTestObserver(t, Config{Mode: ModeEndpointSlices}, nil)
	o.apply(service("db", headless), db)
	expect(t, o.Routing(o.clk.Now()), drain.RoutingUnverified, "no EndpointSlice lists this pod", "default/db: headless Service")
}

// Until the pod watch delivered the pod, its own paths are unknown.
func TestRoutingPodNotRead(t *testing.T) {
	o := newTestObserver(t, Config{Mode: ModeEndpointSlices}, nil)
	o.mu.Lock()
	o.watch.podSeen, o.watch.podPaths = false, nil
	o.mu.Unlock()
	withdrawnWeb(o)
	expect(t, o.Routing(o.clk.Now()), drain.RoutingUnverified, "pod not read")
}

// LoadBalancerDelay holds the verdict that long after the withdrawal (after
// the stop request when no slice lists the pod), then lets it through
// unchanged: unverified when the load balancer's path is known.
func TestRoutingLoadBalancerDelay(t *testing.T) {
	o := newTestObserver(t, Config{Mode: ModeEndpointSlices, LoadBalancerDelay: 30 * time.Second}, nil)
	o.apply(pod(func(p *corev1.Pod) {
		p.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: "target-health.elbv2.k8s.aws/web"}}
	}))
	withdrawnWeb(o)
	o.clk.Step(29 * time.Second)
	expect(t, o.Routing(o.clk.Now()), drain.RoutingPending, "holding 1s more for load balancers to stop sending (load balancer delay 30s)")
	o.clk.Step(time.Second)
	expect(t, o.Routing(o.clk.Now()), drain.RoutingUnverified, "readiness gate target-health.elbv2.k8s.aws/web")

	o = newTestObserver(t, Config{Mode: ModeEndpointSlices, LoadBalancerDelay: 30 * time.Second}, nil)
	withdrawnWeb(o)
	o.clk.Step(10 * time.Second)
	expect(t, o.Routing(o.clk.Now()), drain.RoutingPending, "holding 20s more")
	o.clk.Step(20 * time.Second)
	expect(t, o.Routing(o.clk.Now()), drain.RoutingWithdrawn)

	o = newTestObserver(t, Config{Mode: ModeEndpointSlices, LoadBalancerDelay: 5 * time.Second}, nil)
	o.apply(service("web"))
	expect(t, o.Routing(o.clk.Now()), drain.RoutingPending, "the stop is not requested yet")
	o.StopRequested(o.clk.Now())
	o.clk.Step(5 * time.Second)
	expect(t, o.Routing(o.clk.Now()), drain.RoutingUnverified, "no EndpointSlice lists this pod")

	if _, err := newObserver(Config{Mode: ModeEndpointSlices, Identity: me, LoadBalancerDelay: -time.Second}, nil, nil, nil, nil); err == nil {
		t.Fatal("a negative load balancer delay was accepted")
	}
}

// endpointslices says withdrawn on the API alone, and says so to machines:
// APIOnly, which ends the drain withdrawn-in-api rather than routed-away.
func TestRoutingAPIOnly(t *testing.T) {
	o := newTestObserver(t, Config{Mode: ModeEndpointSlices}, nil)
	withdrawnWeb(o)
	got := o.Routing(o.clk.Now())
	expect(t, got, drain.RoutingWithdrawn)
	if !got.APIOnly {
		t.Fatalf("endpointslices verdict %+v: want APIOnly", got)
	}

	s := newScenario(t, Config{})
	s.syncsAt("n2", 300*ms)
	got = s.round(400 * ms)
	expect(t, got, drain.RoutingWithdrawn, "confirmed by kube-proxy")
	if got.APIOnly {
		t.Fatalf("kube-proxy-confirmed verdict %+v: want not APIOnly", got)
	}
}
