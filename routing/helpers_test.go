package routing

import (
	"context"
	"log/slog"
	"net"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/hapsuper/hapsuper/routing/kube/kubefake"

	"github.com/hapsuper/hapsuper/routing/judge"
)

const ms = time.Millisecond

// t0 is the fake clock's start.
var t0 = time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)

// me is the pod under test: web-0 on node n1, dual-stack.
var me = Identity{PodName: "web-0", Namespace: "default", NodeName: "n1", PodIPs: []string{"10.0.0.5", "fd00::5"}}

// cond is an endpoint's conditions as kube-proxy reads them.
type cond struct{ ready, serving, terminating bool }

var (
	readyC       = cond{ready: true, serving: true}
	servingTermC = cond{serving: true, terminating: true} // deleted, still serving
	goneC        = cond{terminating: true}                // deleted, not serving
)

// ep is an endpoint at addr on node of pod (pod "" = no targetRef).
func ep(addr, node, pod string, c cond) discovery.Endpoint {
	e := discovery.Endpoint{
		Addresses:  []string{addr},
		Conditions: discovery.EndpointConditions{Ready: &c.ready, Serving: &c.serving, Terminating: &c.terminating},
		NodeName:   &node,
	}
	if pod != "" {
		e.TargetRef = &corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: pod}
	}
	return e
}

// mine is this pod's IPv4 endpoint; mine6 its IPv6 one.
func mine(c cond) discovery.Endpoint  { return ep("10.0.0.5", "n1", "web-0", c) }
func mine6(c cond) discovery.Endpoint { return ep("fd00::5", "n1", "web-0", c) }

// peer is another pod's IPv4 endpoint on node; peer6 its IPv6 one.
func peer(node string, c cond) discovery.Endpoint  { return ep("10.0.1.7", node, "web-1", c) }
func peer6(node string, c cond) discovery.Endpoint { return ep("fd00::1:7", node, "web-1", c) }

func slice(name, service string, fam discovery.AddressType, eps ...discovery.Endpoint) *discovery.EndpointSlice {
	return &discovery.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default",
			Labels: map[string]string{judge.LabelServiceName: service, "app": "web"}},
		AddressType: fam,
		Endpoints:   eps,
	}
}

func v4(name, service string, eps ...discovery.Endpoint) *discovery.EndpointSlice {
	return slice(name, service, discovery.AddressTypeIPv4, eps...)
}

func v6(name, service string, eps ...discovery.Endpoint) *discovery.EndpointSlice {
	return slice(name, service, discovery.AddressTypeIPv6, eps...)
}

func service(name string, edit ...func(*corev1.Service)) *corev1.Service {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: "10.96.0.10"},
	}
	for _, e := range edit {
		e(s)
	}
	return s
}

func loadBalancerLocal(s *corev1.Service) {
	s.Spec.Type = corev1.ServiceTypeLoadBalancer
	s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
}

func internalLocal(s *corev1.Service) {
	p := corev1.ServiceInternalTrafficPolicyLocal
	s.Spec.InternalTrafficPolicy = &p
}

func headless(s *corev1.Service) { s.Spec.ClusterIP = corev1.ClusterIPNone }

func node(name, ip string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Status:     corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}}},
	}
}

// testObserver is an observer on a fake clock whose dials go where routes
// says (node address → listener address); unknown addresses are refused.
type testObserver struct {
	*Observer
	clk    *testingclock.FakeClock
	routes map[string]string
	client *fake.Clientset // the API the observer reads, through kubefake
}

func newTestObserver(t testing.TB, cfg Config, client *fake.Clientset) *testObserver {
	t.Helper()
	if cfg.Identity.PodName == "" {
		cfg.Identity = me
	}
	if cfg.RequestTimeout == 0 {
		cfg.RequestTimeout = 500 * ms
	}
	to := &testObserver{clk: testingclock.NewFakeClock(t0), routes: map[string]string{}}
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		target, ok := to.routes[addr]
		if !ok {
			target = closedAddr(t)
		}
		return (&net.Dialer{}).DialContext(ctx, network, target)
	}
	if client == nil {
		client = fake.NewClientset()
	}
	to.client = client
	o, err := newObserver(cfg, kubefake.New(client), to.clk, dial, slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug})))
	if err != nil {
		t.Fatalf("newObserver: %v", err)
	}
	to.Observer = o
	// The pod watch delivered a pod without paths of its own.
	o.mu.Lock()
	o.podEvent(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: cfg.Identity.PodName, Namespace: cfg.Identity.Namespace}})
	o.mu.Unlock()
	return to
}

// apply feeds events as the informers would, at the fake clock's now.
func (to *testObserver) apply(objs ...any) {
	to.mu.Lock()
	defer to.mu.Unlock()
	for _, obj := range objs {
		to.applyAny(obj, false)
	}
	to.synced = true
}

// remove feeds deletions.
func (to *testObserver) remove(objs ...any) {
	to.mu.Lock()
	defer to.mu.Unlock()
	for _, obj := range objs {
		to.applyAny(obj, true)
	}
}

func (to *testObserver) applyAny(obj any, deleted bool) {
	now := to.clk.Now()
	switch o := obj.(type) {
	case *discovery.EndpointSlice:
		to.applySlice(storeSlice(trimSlice(o)), deleted, now)
	case *corev1.Service:
		to.applyService(trimService(o), deleted, now)
	case *corev1.Pod:
		to.applyPod(trimPod(o), deleted, now)
	}
}

// closedAddr is a loopback address nothing listens on.
func closedAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(string(p))
	return len(p), nil
}
