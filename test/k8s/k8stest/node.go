package k8stest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os/exec"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Node is one node: a network namespace with an address on the fabric, a
// pod address range, a Node object and a kube-proxy.
type Node struct {
	// Name is the Node object's name and kube-proxy's hostnameOverride.
	Name string
	// IP is the node's address on the fabric (the Node's InternalIP).
	IP netip.Addr
	// PodCIDR is the range the node's pods get addresses from.
	PodCIDR netip.Prefix
	// NetNS is the name of the node's network namespace (ip netns).
	NetNS string
	// KubeProxy is the node's kube-proxy.
	KubeProxy *KubeProxy

	h       *Harness
	index   int
	nextPod int // last host number given to a pod
}

// startFabric makes the bridge (inside a namespace of its own, so bridged
// traffic never meets the host's firewall) and the host's veth onto it.
func (h *Harness) startFabric() error {
	hostLink := h.link + "h"
	return ipAll(
		[]string{"netns", "add", h.fabric},
		[]string{"-n", h.fabric, "link", "add", "br0", "type", "bridge", "forward_delay", "0", "stp_state", "0"},
		[]string{"-n", h.fabric, "link", "set", "br0", "up"},
		[]string{"link", "add", hostLink, "type", "veth", "peer", "name", "host", "netns", h.fabric},
		[]string{"-n", h.fabric, "link", "set", "host", "master", "br0", "up"},
		[]string{"addr", "add", netip.PrefixFrom(h.slot.hostIP(), 24).String(), "dev", hostLink},
		[]string{"link", "set", hostLink, "up"},
	)
}

// deleteLinkIfPresent deletes a host interface if it still exists (deleting
// the fabric namespace normally takes the host veth with it, and the kernel
// may finish that between the look-up and the delete: "Cannot find device"
// or, from the kernel's own reply, "No such device" is then the link
// already gone).
func deleteLinkIfPresent(name string) error {
	if _, err := net.InterfaceByName(name); err != nil {
		return nil
	}
	err := ip("link", "delete", name)
	if err != nil && (strings.Contains(err.Error(), "Cannot find device") || strings.Contains(err.Error(), "No such device")) {
		return nil
	}
	return err
}

// addNode makes node i's namespace, its Node object and starts its
// kube-proxy (without waiting for it).
func (h *Harness) addNode(ctx context.Context, i int) (*Node, error) {
	n := &Node{
		Name:    "node" + strconv.Itoa(i),
		IP:      h.slot.nodeIP(i),
		PodCIDR: podCIDR(i),
		NetNS:   fmt.Sprintf("%s-n%d", h.prefix, i),
		h:       h,
		index:   i,
		nextPod: 1, // .1 is the pods' gateway, answered by proxy ARP
	}
	cmds := [][]string{
		{"netns", "add", n.NetNS},
		{"-n", n.NetNS, "link", "set", "lo", "up"},
		{"-n", h.fabric, "link", "add", "n" + strconv.Itoa(i), "type", "veth", "peer", "name", "eth0", "netns", n.NetNS},
		{"-n", h.fabric, "link", "set", "n" + strconv.Itoa(i), "master", "br0", "up"},
		{"-n", n.NetNS, "addr", "add", netip.PrefixFrom(n.IP, 24).String(), "dev", "eth0"},
		{"-n", n.NetNS, "link", "set", "eth0", "up"},
		{"-n", n.NetNS, "route", "add", "default", "via", h.slot.hostIP().String()},
	}
	for j := 1; j <= h.Options.Nodes; j++ {
		if j != i {
			cmds = append(cmds, []string{"-n", n.NetNS, "route", "add", podCIDR(j).String(), "via", h.slot.nodeIP(j).String()})
		}
	}
	if err := ipAll(cmds...); err != nil {
		return nil, fmt.Errorf("make node %s: %w", n.Name, err)
	}
	if err := writeSysctl(n.NetNS, "net.ipv4.ip_forward", "1"); err != nil {
		return nil, err
	}
	if err := n.masqueradeToHost(); err != nil {
		return nil, err
	}
	if err := h.createNodeObject(ctx, n); err != nil {
		return nil, err
	}
	kp, err := newKubeProxy(n)
	if err != nil {
		return nil, err
	}
	n.KubeProxy = kp
	if err := kp.Start(); err != nil {
		return nil, err
	}
	return n, nil
}

// clusterCIDR holds every node's pod range.
const clusterCIDR = "10.251.0.0/16"

// podCIDR is node i's pod range, a /20 (4,093 pods: a soak of 100 drains
// for each of 6 client patterns creates ~300 pods per node, more than a /24
// holds; addresses are never reused within a run). Nodes are 1 to 9.
func podCIDR(i int) netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 251, byte(i * 16), 0}), 20)
}

// podHosts is how many pod addresses a node's range gives after the gateway.
const podHosts = 1<<(32-20) - 2

func (h *Harness) createNodeObject(ctx context.Context, n *Node) error {
	obj := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: map[string]string{"kubernetes.io/hostname": n.Name}},
		Spec:       corev1.NodeSpec{PodCIDR: n.PodCIDR.String(), PodCIDRs: []string{n.PodCIDR.String()}},
	}
	created, err := h.Client.CoreV1().Nodes().Create(ctx, obj, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create Node %s: %w", n.Name, err)
	}
	now := metav1.Now()
	created.Status = corev1.NodeStatus{
		Addresses: []corev1.NodeAddress{
			{Type: corev1.NodeInternalIP, Address: n.IP.String()},
			{Type: corev1.NodeHostName, Address: n.Name},
		},
		Conditions: []corev1.NodeCondition{{
			Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
			LastHeartbeatTime: now, LastTransitionTime: now,
		}},
	}
	if _, err := h.Client.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("set status of Node %s: %w", n.Name, err)
	}
	return nil
}

// Command returns a command that runs inside the node's network namespace
// (through ip netns exec). The caller starts and waits for it.
func (n *Node) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", n.NetNS, name}, args...)...)
}

// DialContext opens a connection from inside the node's network namespace,
// as a process on the node would. addr must hold an IP address, not a name.
func (n *Node) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	return dialIn(n.NetNS)(ctx, network, addr)
}

// HTTPClient returns a client whose every request opens a new connection
// from inside the node's network namespace, so each request is routed (and
// load-balanced by kube-proxy's rules) afresh. URLs must use IP addresses.
func (n *Node) HTTPClient(timeout time.Duration) *http.Client {
	return &http.Client{
		Timeout: timeout,
		Transport: &http.Transport{
			DialContext:       dialIn(n.NetNS),
			DisableKeepAlives: true,
			Proxy:             nil,
		},
	}
}

// masqueradeToHost lets the node's pods reach the host (the apiserver): the
// host has no routes to pod ranges (they repeat across parallel runs), so
// pod traffic to anything but another pod leaves with the node's address,
// and the host's answers never follow its default route off the machine.
// The table is the harness's own; kube-proxy's tables are untouched.
func (n *Node) masqueradeToHost() error {
	return n.NFT(fmt.Sprintf(`table ip hapsuper-test {
	chain postrouting {
		type nat hook postrouting priority srcnat + 10; policy accept;
		oifname "eth0" ip saddr %s ip daddr != %s masquerade
	}
}
`, n.PodCIDR, clusterCIDR))
}

// NFT runs an nftables script (nft -f -) inside the node's network
// namespace.
func (n *Node) NFT(script string) error {
	cmd := exec.Command("ip", "netns", "exec", n.NetNS, "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(script)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("nft on %s: %w: %s\n%s", n.Name, err, out, script)
	}
	return nil
}
