package kube

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hapsuper/hapsuper/test/harness"
	"github.com/hapsuper/hapsuper/test/k8s/k8stest"
)

// LoadBalancerService creates Service name: type LoadBalancer,
// externalTrafficPolicy Local, selecting app=app, with ports. It returns
// the Service as created, with the node ports and the health check node
// port the apiserver allocated.
func (e *Env) LoadBalancerService(ctx context.Context, name, app string, ports ...corev1.ServicePort) (*corev1.Service, error) {
	svc, err := e.H.Client.CoreV1().Services(k8stest.PodNamespace).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.ServiceSpec{
			Type:                  corev1.ServiceTypeLoadBalancer,
			ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyLocal,
			Selector:              map[string]string{"app": app},
			Ports:                 ports,
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("create LoadBalancer Service %s: %w", name, err)
	}
	if svc.Spec.HealthCheckNodePort == 0 || slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.NodePort == 0 }) {
		return nil, fmt.Errorf("Service %s: no node port or health check node port allocated: %+v", name, svc.Spec)
	}
	return svc, nil
}

// Balancer is a network load balancer's stand-in outside the nodes: a real
// HAProxy in TCP mode on the host, one frontend per Service port, each
// forwarding to that port's NodePort on every node, and health-checking
// every node's healthCheckNodePort (GET /, expect 200, no retries), as a
// cloud load balancer in front of a LoadBalancer Service with
// externalTrafficPolicy Local does. It polls its own stats every 50 ms and
// records when it marked each node down.
type Balancer struct {
	*harness.Process
	addrs []string // per Service port, where clients connect
	stats string   // its stats socket
	watch *harness.ServerWatch
}

// StartBalancer starts the balancer in front of nodes for svc (from
// LoadBalancerService), its files in dir (a path without commas: HAProxy's
// address syntax), checking every inter and marking a node down after fall
// failures. It runs until t's cleanup.
func StartBalancer(t harness.TB, dir string, nodes []*k8stest.Node, svc *corev1.Service, inter time.Duration, fall int) *Balancer {
	t.Helper()
	lb := &Balancer{stats: filepath.Join(dir, "stats.sock")}
	var b strings.Builder
	fmt.Fprintf(&b, `global
    stats socket %s mode 600 level admin
defaults
    mode tcp
    retries 0
    timeout connect 1s
    timeout client 30s
    timeout server 30s
`, lb.stats)
	for i, p := range svc.Spec.Ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("balancer: %v", err)
		}
		addr := l.Addr().String()
		l.Close()
		lb.addrs = append(lb.addrs, addr)
		fmt.Fprintf(&b, "frontend lb%d\n    bind %s\n    default_backend nodes%d\n", i, addr, i)
		fmt.Fprintf(&b, "backend nodes%d\n    option httpchk GET /\n    http-check expect status 200\n", i)
		fmt.Fprintf(&b, "    default-server check port %d inter %dms fall %d rise 1\n", svc.Spec.HealthCheckNodePort, inter.Milliseconds(), fall)
		for _, n := range nodes {
			fmt.Fprintf(&b, "    server %s %s:%d\n", n.Name, n.IP, p.NodePort)
		}
	}
	path := filepath.Join(dir, "balancer.cfg")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatalf("balancer: %v", err)
	}
	var err error
	if lb.Process, err = harness.Start(exec.Command("/usr/sbin/haproxy", "-db", "-f", path)); err != nil {
		t.Fatalf("start the balancer: %v", err)
	}
	for _, addr := range lb.addrs {
		if err := harness.WaitListening(nil, addr, 5*time.Second); err != nil {
			lb.Kill()
			t.Fatalf("balancer: %v; log:\n%s", err, lb.Tail(20))
		}
	}
	watch, stop := harness.WatchServers(lb.stats, "nodes0") // every backend checks the same port
	lb.watch = watch
	t.Cleanup(func() {
		stop()
		lb.Kill()
		if t.Failed() {
			t.Logf("balancer log:\n%s", lb.Tail(40))
		}
	})
	return lb
}

// URL is where clients reach the Service's i-th port through the balancer.
func (lb *Balancer) URL(i int) string { return "http://" + lb.addrs[i] + "/" }

// States is the status column of `show stat` for each node, as the first
// port's backend has it (every backend checks the same port).
func (lb *Balancer) States() (map[string]string, error) {
	return harness.ServerStates(lb.stats, "nodes0")
}

// DownAt is when the balancer marked node down, zero while it has not
// (since it last had it up).
func (lb *Balancer) DownAt(node string) time.Time { return lb.watch.DownAt(node) }

// WaitUp waits, at most bound, until the balancer has every node of nodes up.
func (lb *Balancer) WaitUp(bound time.Duration, nodes ...string) error {
	for deadline := time.Now().Add(bound); ; time.Sleep(50 * time.Millisecond) {
		if !slices.ContainsFunc(nodes, func(s string) bool { return !lb.watch.Up(s) }) {
			return nil
		}
		if time.Now().After(deadline) {
			st, err := lb.States()
			return fmt.Errorf("balancer: nodes %v not all UP within %v: %v %v", nodes, bound, st, err)
		}
	}
}
