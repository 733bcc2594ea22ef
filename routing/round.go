package routing

import (
	"context"
	"errors"
	"net/netip"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
)

// rounds asks the nodes' kube-proxies and the balancers' health checks
// side by side, each round at most Concurrency requests at a time, so
// that health checks that do not answer hold kube-proxy's confirmation up
// by no more than the round's own timeout (asked in turn, N of them held
// it up N times that). It returns when both rounds have.
func (o *Observer) rounds(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { o.balancerRound(ctx) })
	o.confirmRound(ctx)
}

// confirmRound asks every node not yet confirmed, once, if the drain has
// started in ModeKubeProxy and the API says withdrawn everywhere. It returns
// when every request has ended, each within RequestTimeout.
func (o *Observer) confirmRound(ctx context.Context) {
	o.mu.Lock()
	ready := o.cfg.Mode == ModeKubeProxy && o.synced && !o.stopAt.IsZero() && o.apiWithdrawn()
	listed := o.nodes != nil
	o.mu.Unlock()
	if !ready || (!listed && !o.listNodes(ctx)) {
		return
	}
	if listed && o.relistDue() {
		o.listNodes(ctx) // a failure keeps the set read before
	}
	o.mu.Lock()
	targets := o.targets()
	var todo []*nodeState
	for _, n := range o.nodes {
		if v, _ := o.rule.judgeNode(n, targets); v != nodeConfirmed && n.addr != "" {
			todo = append(todo, n)
		}
	}
	o.mu.Unlock()

	fanOut(ctx, o.cfg.Concurrency, todo, func(n *nodeState) { o.pollNode(ctx, n) })
}

// fanOut calls poll for every item, at most limit at a time, and returns
// once every call it started has returned; it starts none once ctx is done.
func fanOut[T any](ctx context.Context, limit int, items []T, poll func(T)) {
	sem := make(chan struct{}, limit)
	var wg sync.WaitGroup
	defer wg.Wait()
	for _, it := range items {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			return
		}
		wg.Go(func() {
			defer func() { <-sem }()
			poll(it)
		})
	}
}

// pollNode reads one node's healthz and records what it said.
func (o *Observer) pollNode(ctx context.Context, n *nodeState) {
	h, sent, received, via, err := o.fetchHealthz(ctx, n.addr)
	if ctx.Err() != nil {
		return // shutting down: what the node said before stands
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if err != nil {
		var pe *pollError
		if !errors.As(err, &pe) {
			pe = &pollError{msg: err.Error()}
		}
		if n.problem == nil || n.problem.msg != pe.msg {
			o.log.Warn("kube-proxy healthz poll failed", "node", n.name, "addr", n.addr, "pending", pe.pending, "err", pe.msg)
		}
		n.problem, n.failed = pe, true
		if pe.pending { // accepted, never answered: kube-proxy is not running
			n.stalled(sent, o.clock.Now())
		}
		return
	}
	if via.reconnected {
		// kube-proxy's server does not close idle connections: the
		// process that answered on the one it closed may be gone, and a
		// new lastUpdated a restarted instance's start stamp.
		n.failed = true
	}
	n.record(h, sent, received, o.rule.allowance, via.kept)
	if v, _ := o.rule.judgeNode(n, o.targets()); v == nodeConfirmed {
		o.log.Info("kube-proxy confirmed the withdrawal", "node", n.name, "rtt", received.Sub(sent))
		// Not asked again unless a later withdrawal needs it: its kept
		// connection (a socket and its buffer) would stay until exit.
		o.http.closeIdle(n.addr)
		o.conns.close(n.addr)
	}
}

// internalIP is the node's first IPv4 InternalIP, else its first IPv6 one.
// kube-proxy's default healthz bind address, 0.0.0.0:10256, listens on IPv4.
func internalIP(node *corev1.Node) netip.Addr {
	var v6 netip.Addr
	for _, a := range node.Status.Addresses {
		if a.Type != corev1.NodeInternalIP {
			continue
		}
		ip, err := netip.ParseAddr(a.Address)
		switch {
		case err != nil:
		case ip.Unmap().Is4():
			return ip.Unmap()
		case !v6.IsValid():
			v6 = ip
		}
	}
	return v6
}

// apiWithdrawn says whether the API verdict is withdrawn on every path.
func (o *Observer) apiWithdrawn() bool {
	if len(o.watch.paths) == 0 {
		return false
	}
	for _, p := range o.watch.paths {
		if !p.withdrawn {
			return false
		}
	}
	return true
}

// targets is, per family, the receipt time R of the change kube-proxy must
// hold: the latest withdrawal among the family's paths. kube-proxy programs
// its whole state at each sync, and the rule's premises hold for every
// change received by R: a sync proven to hold a change received at R holds
// the earlier ones too.
func (o *Observer) targets() map[discovery.AddressType]time.Time {
	t := map[discovery.AddressType]time.Time{}
	for k, p := range o.watch.paths {
		if p.withdrawn && p.since.After(t[k.family]) {
			t[k.family] = p.since
		}
	}
	return t
}
