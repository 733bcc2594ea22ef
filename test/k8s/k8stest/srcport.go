package k8stest

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"syscall"
)

// The harness's clients take their TCP source ports in turn, per network
// namespace, instead of leaving the choice to the kernel.
//
// Why: a client on a node reaches a ClusterIP through kube-proxy's DNAT and
// masquerade (fully random source port). The node's conntrack ends a
// connection's TIME_WAIT entry at once when a new connection needs one of
// its tuples: the kernel's connect() reusing the client's source port
// (seen after 32 s at 25 connections/s), or any client port equal to a
// port the masquerade drew. That frees the masqueraded tuple while the pod
// still holds it (60 s of TIME_WAIT or FIN_WAIT2 there); when the
// masquerade draws it again, the pod's old socket answers the SYN: an ACK
// the client resets and retries, or, from FIN_WAIT2, a RST: a "connection
// refused" from a live, listening pod that has nothing to do with a drain
// (1 request in ~12,000 under load, in TestDrain_Measure and
// TestHarness_ClusterIPWithdrawal; conntrack -E showed 6 and 10 such
// resets per TestDrain_Measure run). Ports taken in turn over 28,000
// values come back after 280 s at 100 connections/s, past conntrack's
// 120 s TIME_WAIT, which removes the reuse (1-2 resets per run were left,
// from masquerade draws); pods keep no TIME_WAIT sockets (pod.go), which
// removes what is left. The range lies above the NodePort range
// (30000-32767), where kube-proxy listens for a Service's health check
// node port in the node's namespace.
const (
	firstSourcePort = 33000
	lastSourcePort  = 60999
)

// sourcePorts is the next port per namespace.
var sourcePorts = struct {
	sync.Mutex
	next map[string]int
}{next: map[string]int{}}

// nextSourcePort returns the port after last in the harness's range, wrapping
// at its end (last 0: the first one).
func nextSourcePort(last int) int {
	if last < firstSourcePort || last >= lastSourcePort {
		return firstSourcePort
	}
	return last + 1
}

// takeSourcePort hands out netns's next port.
func takeSourcePort(netns string) int {
	sourcePorts.Lock()
	defer sourcePorts.Unlock()
	p := nextSourcePort(sourcePorts.next[netns])
	sourcePorts.next[netns] = p
	return p
}

// dialFrom dials addr from the namespace's next free source port (TCP; other
// networks as the kernel chooses). A port still held by one of the
// namespace's sockets (EADDRINUSE) is skipped; after 64 of them the kernel
// chooses.
func dialFrom(ctx context.Context, netns, network, addr string) (net.Conn, error) {
	if !strings.HasPrefix(network, "tcp") {
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}
	for range 64 {
		d := net.Dialer{LocalAddr: &net.TCPAddr{Port: takeSourcePort(netns)}}
		conn, err := d.DialContext(ctx, network, addr)
		if !errors.Is(err, syscall.EADDRINUSE) {
			return conn, err
		}
	}
	return (&net.Dialer{}).DialContext(ctx, network, addr)
}
