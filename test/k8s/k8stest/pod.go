package k8stest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os/exec"
	"strconv"
	"sync"
	"time"

	"github.com/hapsuper/hapsuper/test/harness"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// PodNamespace is the Kubernetes namespace AddPod creates pods in.
const PodNamespace = "default"

// Pod is a pod the test plays the kubelet for: a Pod object bound to a node
// and a network namespace with the pod's address, routed through the node.
type Pod struct {
	// Name and Namespace name the Pod object.
	Name, Namespace string
	// Node is the node the pod runs on.
	Node *Node
	// IP is the pod's address.
	IP netip.Addr
	// NetNS is the name of the pod's network namespace (ip netns).
	NetNS string

	mu      sync.Mutex
	servers []*server
}

// server is one HTTP server in the pod; done is closed with err set when
// Serve returns.
type server struct {
	srv  *http.Server
	done chan struct{}
	err  error
}

// AddPod creates a pod on node (counting from 1): its network namespace,
// with an address from the node's range, and its Pod object (spec.nodeName
// set, not ready). Make it ready with SetPodReady. The namespace goes at the
// harness's cleanup. edit, if any, changes the Pod object before it is
// created (hostNetwork, readiness gates, ports).
func (h *Harness) AddPod(t harness.TB, node int, name string, labels map[string]string, edit ...func(*corev1.Pod)) *Pod {
	t.Helper()
	n := h.Node(node)
	h.mu.Lock()
	n.nextPod++
	host := n.nextPod
	h.mu.Unlock()
	if host > podHosts {
		t.Fatalf("k8stest: AddPod %s: node %s has no addresses left (%d pods made)", name, n.Name, podHosts-1)
	}
	p := &Pod{
		Name: name, Namespace: PodNamespace, Node: n,
		IP:    podAddr(n.PodCIDR, host),
		NetNS: fmt.Sprintf("%s-n%d-p%d", h.prefix, n.index, host),
	}
	h.mu.Lock()
	h.pods = append(h.pods, p)
	h.mu.Unlock()
	if err := p.makeNetwork(host); err != nil {
		t.Fatalf("k8stest: AddPod %s: %v", name, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	obj := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: PodNamespace, Labels: labels},
		Spec: corev1.PodSpec{
			NodeName:                      n.Name,
			AutomountServiceAccountToken:  ptr.To(false),
			TerminationGracePeriodSeconds: ptr.To[int64](60),
			Containers:                    []corev1.Container{{Name: "app", Image: "hapsuper.invalid/none"}},
		},
	}
	for _, e := range edit {
		e(obj)
	}
	if _, err := h.Client.CoreV1().Pods(PodNamespace).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
		t.Fatalf("k8stest: create Pod %s: %v", name, err)
	}
	return p
}

// podAddr is the host-th address of a node's pod range.
func podAddr(cidr netip.Prefix, host int) netip.Addr {
	a := cidr.Addr().As4()
	v := uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])
	v += uint32(host)
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// makeNetwork gives the pod eth0 with its /32 address, a default route to
// the node (which answers for the gateway by proxy ARP) and the node a route
// back.
func (p *Pod) makeNetwork(host int) error {
	node, veth := p.Node.NetNS, "pv"+strconv.Itoa(host)
	gateway := p.Node.PodCIDR.Addr().Next().String()
	if err := ipAll(
		[]string{"netns", "add", p.NetNS},
		[]string{"-n", p.NetNS, "link", "set", "lo", "up"},
		[]string{"-n", node, "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", p.NetNS},
		[]string{"-n", p.NetNS, "addr", "add", p.IP.String() + "/32", "dev", "eth0"},
		[]string{"-n", p.NetNS, "link", "set", "eth0", "up"},
		[]string{"-n", p.NetNS, "route", "add", gateway, "dev", "eth0", "scope", "link"},
		[]string{"-n", p.NetNS, "route", "add", "default", "via", gateway, "dev", "eth0"},
		[]string{"-n", node, "link", "set", veth, "up"},
		[]string{"-n", node, "route", "add", p.IP.String() + "/32", "dev", veth},
	); err != nil {
		return err
	}
	if err := writeSysctl(node, "net.ipv4.conf."+veth+".proxy_arp", "1"); err != nil {
		return err
	}
	// The pod keeps no TIME_WAIT or FIN_WAIT2 sockets: a node's conntrack
	// can forget a masqueraded tuple while the pod still holds it (see
	// srcport.go), and the pod's old socket would then answer a new SYN
	// with an ACK or a RST (a refused request from a live pod).
	return writeSysctl(p.NetNS, "net.ipv4.tcp_max_tw_buckets", "0")
}

// ServeHTTP serves handler on port inside the pod's network namespace until
// t's cleanup. A nil handler answers every request with the pod's name.
func (p *Pod) ServeHTTP(t harness.TB, port int, handler http.Handler) {
	t.Helper()
	if handler == nil {
		handler = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			_, _ = w.Write([]byte(p.Name))
		})
	}
	ln, err := listenIn(p.NetNS, "tcp", ":"+strconv.Itoa(port))
	if err != nil {
		t.Fatalf("k8stest: %v", err)
	}
	s := &server{srv: &http.Server{Handler: handler, ReadHeaderTimeout: 5 * time.Second}, done: make(chan struct{})}
	p.mu.Lock()
	p.servers = append(p.servers, s)
	p.mu.Unlock()
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			s.err = err
		}
	}()
	t.Cleanup(func() {
		if err := p.closeServers(); err != nil {
			t.Errorf("k8stest: %v", err)
		}
	})
}

// closeServers stops the pod's HTTP servers, waits (bounded) for them, and
// returns the first error one of them stopped with.
func (p *Pod) closeServers() error {
	p.mu.Lock()
	servers := p.servers
	p.servers = nil
	p.mu.Unlock()
	var first error
	for _, s := range servers {
		_ = s.srv.Close()
		select {
		case <-s.done:
			if s.err != nil && first == nil {
				first = fmt.Errorf("serve HTTP in pod %s: %w", p.Name, s.err)
			}
		case <-time.After(5 * time.Second):
			if first == nil {
				first = fmt.Errorf("stop HTTP server in pod %s: still serving after 5s", p.Name)
			}
		}
	}
	return first
}

// DialContext opens a connection from inside the pod's network namespace.
// addr must hold an IP address, not a name.
func (p *Pod) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	return dialIn(p.NetNS)(ctx, network, addr)
}

// Command returns a command that runs inside the pod's network namespace
// (through ip netns exec). The caller starts and waits for it.
func (p *Pod) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", p.NetNS, name}, args...)...)
}

// SetPodReady does the kubelet's status update: phase Running, the pod's
// and node's addresses, and the Ready and ContainersReady conditions set to
// ready. It works on a terminating pod too.
func (h *Harness) SetPodReady(ctx context.Context, p *Pod, ready bool) error {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	now := metav1.Now()
	patch := map[string]any{"status": corev1.PodStatus{
		Phase:     corev1.PodRunning,
		HostIP:    p.Node.IP.String(),
		HostIPs:   []corev1.HostIP{{IP: p.Node.IP.String()}},
		PodIP:     p.IP.String(),
		PodIPs:    []corev1.PodIP{{IP: p.IP.String()}},
		StartTime: &now,
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodReady, Status: status, LastTransitionTime: now},
			{Type: corev1.ContainersReady, Status: status, LastTransitionTime: now},
		},
	}}
	data, err := json.Marshal(patch)
	if err != nil {
		return fmt.Errorf("encode status of pod %s: %w", p.Name, err)
	}
	if _, err := h.Client.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.MergePatchType, data, metav1.PatchOptions{}, "status"); err != nil {
		return fmt.Errorf("set pod %s ready=%v: %w", p.Name, ready, err)
	}
	return nil
}

// DeletePod deletes the Pod object with the given grace period, as kubectl
// delete --grace-period would: the object stays, terminating, until
// FinishPod (the kubelet's part) or the harness ends.
func (h *Harness) DeletePod(ctx context.Context, p *Pod, grace time.Duration) error {
	opts := metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(grace / time.Second))}
	if err := h.Client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, opts); err != nil {
		return fmt.Errorf("delete pod %s: %w", p.Name, err)
	}
	return nil
}

// FinishPod does what the kubelet does when the pod's containers have
// stopped: it stops the pod's servers and removes the object (grace 0). The
// pod's network namespace stays until the harness ends.
func (h *Harness) FinishPod(ctx context.Context, p *Pod) error {
	if err := p.closeServers(); err != nil {
		return err
	}
	opts := metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}
	if err := h.Client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, opts); err != nil {
		return fmt.Errorf("remove pod %s: %w", p.Name, err)
	}
	return nil
}
