package k8stest

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hapsuper/hapsuper/test/harness"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Options shape one harness.
type Options struct {
	// Nodes is how many nodes (network namespaces with a kube-proxy) to
	// start: 1 to 9; 0 means 1.
	Nodes int
	// ProxyMode is kube-proxy's mode: "nftables" (the default) or "iptables".
	ProxyMode string
	// MinSyncPeriod is kube-proxy's minSyncPeriod; 0 means 1s.
	MinSyncPeriod time.Duration
	// KubeletNode, when not 0, is the node (counting from 1) that runs a
	// real kubelet with containerd and runc (see Kubelet); the
	// controller-manager then also runs the deployment and replicaset
	// controllers. Needs the kubelet binary and Debian's containerd, runc,
	// containernetworking-plugins and gcc.
	KubeletNode int
	// KubeProxyMetrics binds kube-proxy's metrics to the node's address
	// (MetricsPort) instead of its loopback, as clusters that Prometheus
	// scrapes do, for hapsuper's --kube-proxy-metrics-port.
	KubeProxyMetrics bool
}

// Harness is one running cluster. Start makes it; t.Cleanup removes it.
type Harness struct {
	// Client talks to the apiserver as a member of system:masters.
	Client kubernetes.Interface
	// Config is Client's configuration, for other clients (informers).
	Config *rest.Config
	// Options are the options the harness runs with, defaults filled in.
	Options Options

	t      harness.TB
	bin    string // directory of the binaries
	dir    string // temporary directory: certificates, configs, logs, etcd data
	slot   *slot
	prefix string // network namespace name prefix: hs-<pid>-<seq>
	link   string // host interface name prefix: hs<pid>_<seq>
	fabric string // network namespace holding the bridge
	pki    *pki

	etcd, controllerManager *Process
	apiserverArgv           []string
	apiMu                   sync.Mutex // guards apiserver (RestartAPIServer)
	apiserver               *Process

	nodes   []*Node
	kubelet *Kubelet
	mu      sync.Mutex
	pods    []*Pod
}

var harnessSeq atomic.Int64

// Start runs etcd, kube-apiserver, kube-controller-manager and
// opts.Nodes nodes, each with its kube-proxy healthy, and returns when the
// cluster is ready for pods. It skips the test when a prerequisite is
// missing (fails it when CI=true), and fails it when anything does not come
// up. Everything is removed at t's cleanup, also when Start fails halfway.
func Start(t harness.TB, opts Options) *Harness {
	t.Helper()
	bin := requirePrerequisites(t)
	if opts.Nodes == 0 {
		opts.Nodes = 1
	}
	if opts.Nodes < 1 || opts.Nodes > 9 {
		t.Fatalf("k8stest: Options.Nodes = %d: want 1 to 9", opts.Nodes)
	}
	if opts.ProxyMode == "" {
		opts.ProxyMode = "nftables"
	}
	if opts.ProxyMode != "nftables" && opts.ProxyMode != "iptables" {
		t.Fatalf("k8stest: Options.ProxyMode = %q: want nftables or iptables", opts.ProxyMode)
	}
	if opts.MinSyncPeriod == 0 {
		opts.MinSyncPeriod = time.Second
	}
	if opts.KubeletNode < 0 || opts.KubeletNode > opts.Nodes {
		t.Fatalf("k8stest: Options.KubeletNode = %d: want 0 (none) or a node, 1 to %d", opts.KubeletNode, opts.Nodes)
	}
	if opts.KubeletNode != 0 {
		requireKubeletPrerequisites(t, bin)
	}
	removeStale(t.Logf)

	s, err := claimSlot()
	if err != nil {
		t.Fatalf("k8stest: %v", err)
	}
	seq := harnessSeq.Add(1) % 100
	h := &Harness{
		Options: opts,
		t:       t,
		bin:     bin,
		slot:    s,
		prefix:  fmt.Sprintf("hs-%d-%d", os.Getpid(), seq),
		link:    fmt.Sprintf("hs%d_%d", os.Getpid(), seq),
	}
	h.fabric = h.prefix + "-fabric"
	t.Cleanup(h.teardown)
	if err := h.start(); err != nil {
		t.Fatalf("k8stest: start cluster: %v", err)
	}
	return h
}

func (h *Harness) start() error {
	began := time.Now()
	var err error
	if h.dir, err = os.MkdirTemp("", fmt.Sprintf("hapsuper-k8s-%d-", os.Getpid())); err != nil {
		return fmt.Errorf("create temporary directory: %w", err)
	}
	if h.pki, err = newPKI(h.dir, h.slot.hostIP().AsSlice(), firstServiceIP.AsSlice()); err != nil {
		return err
	}
	if err := h.startFabric(); err != nil {
		return err
	}
	if err := h.startControlPlane(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for i := 1; i <= h.Options.Nodes; i++ {
		n, err := h.addNode(ctx, i)
		if err != nil {
			return err
		}
		h.nodes = append(h.nodes, n)
	}
	nodesAt := time.Now()
	if err := h.waitDefaultServiceAccount(ctx); err != nil {
		return err
	}
	for _, n := range h.nodes {
		if err := n.KubeProxy.WaitHealthy(ctx); err != nil {
			return err
		}
	}
	if h.Options.KubeletNode != 0 {
		kctx, kcancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer kcancel()
		if _, err := h.startKubelet(kctx, h.nodes[h.Options.KubeletNode-1]); err != nil {
			return err
		}
	}
	h.t.Logf("k8stest: %d node(s), kube-proxy %s, healthy %v after the nodes were made; cluster up in %v (slot %d, %s)",
		len(h.nodes), h.Options.ProxyMode, time.Since(nodesAt).Round(time.Millisecond),
		time.Since(began).Round(time.Millisecond), h.slot.n, h.dir)
	return nil
}

// APIServer returns the apiserver's address, reachable from the host, every
// node and every pod.
func (h *Harness) APIServer() netip.AddrPort {
	return netip.AddrPortFrom(h.slot.hostIP(), uint16(h.slot.apiserverPort()))
}

// APIServerProcess returns the kube-apiserver process, for tests that stop
// it (Kill: teardown then expects it gone). Nothing that needs the API
// works afterwards.
func (h *Harness) APIServerProcess() *Process {
	h.apiMu.Lock()
	defer h.apiMu.Unlock()
	return h.apiserver
}

// Node returns node i, counting from 1 (node i is named "node<i>").
func (h *Harness) Node(i int) *Node {
	if i < 1 || i > len(h.nodes) {
		h.t.Fatalf("k8stest: Node(%d): the harness has nodes 1 to %d", i, len(h.nodes))
	}
	return h.nodes[i-1]
}

// Nodes returns every node, node1 first.
func (h *Harness) Nodes() []*Node { return h.nodes }

// Kubelet returns the kubelet of Options.KubeletNode.
func (h *Harness) Kubelet() *Kubelet {
	if h.kubelet == nil {
		h.t.Fatalf("k8stest: Kubelet(): the harness runs no kubelet (Options.KubeletNode is 0)")
	}
	return h.kubelet
}

// KubeProxy returns node i's kube-proxy.
func (h *Harness) KubeProxy(i int) *KubeProxy { return h.Node(i).KubeProxy }

// teardown removes everything, in reverse order, and reports what it could
// not remove. On failure it shows the end of every component's log.
func (h *Harness) teardown() {
	if h.kubelet != nil {
		// No controller may replace the pods the kubelet stops.
		if h.controllerManager != nil {
			if err := h.controllerManager.Crashed(); err == nil {
				_ = h.controllerManager.Kill()
			}
		}
		if err := h.kubelet.stopPods(h); err != nil {
			h.t.Errorf("k8stest: %v", err)
		}
		for _, err := range h.kubelet.stop(h.t.Failed(), h.t.Logf) {
			h.t.Errorf("k8stest: %v", err)
		}
	}
	var procs []*Process
	for _, n := range h.nodes {
		if p := n.KubeProxy.Process(); p != nil {
			procs = append(procs, p)
		}
	}
	procs = append(procs, h.controllerManager, h.APIServerProcess(), h.etcd)
	for _, p := range procs {
		if p == nil {
			continue
		}
		if err := p.Crashed(); err != nil {
			h.t.Errorf("k8stest: %s exited during the test: %v; its log ends:\n%s", p.Name, err, p.LogTail(30))
		} else if h.t.Failed() {
			h.t.Logf("k8stest: %s log ends:\n%s", p.Name, p.LogTail(30))
		}
		if err := p.Kill(); err != nil {
			h.t.Errorf("k8stest: %v", err)
		}
	}
	h.mu.Lock()
	pods := h.pods
	h.mu.Unlock()
	var netns []string
	for _, p := range pods {
		netns = append(netns, p.NetNS)
	}
	for _, n := range h.nodes {
		netns = append(netns, n.NetNS)
	}
	for _, name := range append(netns, h.fabric) {
		if err := deleteNetNS(name); err != nil {
			h.t.Errorf("k8stest: delete network namespace: %v", err)
		}
	}
	if err := deleteLinkIfPresent(h.link + "h"); err != nil {
		h.t.Errorf("k8stest: %v", err)
	}
	h.slot.release()
	if h.dir != "" {
		if err := os.RemoveAll(h.dir); err != nil {
			h.t.Errorf("k8stest: remove %s: %v", h.dir, err)
		}
	}
}

// path names a file in the harness's temporary directory.
func (h *Harness) path(name string) string { return filepath.Join(h.dir, name) }
