package routing

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/utils/clock"

	"github.com/hapsuper/hapsuper/routing/judge"
)

// rounds asks the nodes' kube-proxies and the balancers' health checks
// side by side, each at most Concurrency requests at a time. The
// kube-proxies are asked on their schedule (schedule.go), those due
// before the next tick; the balancers' checks about every PollInterval,
// whatever the tick, in a round of their own that the next does not wait
// for (polling): a health check that does not answer holds neither
// kube-proxy's confirmation nor the next round, and no second balancers'
// round starts while one runs (balancing). It returns when the
// kube-proxies' round has (scheduledRound's again).
func (o *Observer) rounds(ctx context.Context) (again bool) {
	now, tick := o.clock.Now(), o.roundEvery()
	if o.balancerDue(now, tick) && o.balancing.CompareAndSwap(false, true) {
		o.balancerAt = now
		o.polling.Go(func() {
			defer o.balancing.Store(false)
			o.balancerRound(ctx)
		})
	}
	again = o.scheduledRound(ctx, now.Add(tick))
	o.releaseFirstPass()
	return again
}

// balancerDue says the balancers' checks are asked in the round starting
// at now, tick before the next: about every PollInterval from the stop
// request on, never while the pod serves (balancerRound asks nothing
// then, and a goroutine a round costs an idle process its CPU).
func (o *Observer) balancerDue(now time.Time, tick time.Duration) bool {
	o.mu.Lock()
	stopped := !o.stopAt.IsZero()
	o.mu.Unlock()
	return stopped && (tick == o.cfg.PollInterval || now.Sub(o.balancerAt) >= o.cfg.PollInterval-tick/2)
}

// confirmRound asks every node not yet confirmed, once, if the drain has
// started in ModeKubeProxy and the API says withdrawn everywhere. Before
// that, from the first of the stop request and the watch seeing the pod's
// deletion, it asks every node that has not answered yet, once: a baseline.
// Its connection, kept, then carries the answers after the withdrawal, and
// a lastUpdated new on it is a sync of the process that answered before;
// without it, the first answer after the withdrawal may come from a
// kube-proxy restarted since, whose start stamp is not a sync
// (judge.syncFacts.firstAnswer). It returns when every request has ended,
// each within RequestTimeout. Run's rounds ask the same nodes, each on its
// schedule (scheduledRound).
func (o *Observer) confirmRound(ctx context.Context) {
	todo := o.confirmTodo(ctx, time.Time{})
	fanOut(ctx, o.cfg.Concurrency, todo, func(n *judge.Node) { o.pollNode(ctx, n) })
	o.witnessing.Wait() // and the metrics reads it started, each within MetricsTimeout
}

// confirmTodo lists the nodes a round asks (confirmRound), reading the
// node list first when due. While the pod serves, with the baseline on
// (baseline.go), those are the nodes whose baseline poll is due before
// until; zero until: every node.
func (o *Observer) confirmTodo(ctx context.Context, until time.Time) (todo []*judge.Node) {
	o.mu.Lock()
	serving := o.serving()
	if !serving && o.drainSeen.IsZero() {
		o.drainSeen = o.clock.Now()
	}
	withdrawn := !serving && judge.APIWithdrawn(o.watch.paths)
	ready := o.cfg.Mode == ModeKubeProxy && o.synced && (!serving || o.baselineOn())
	listed := o.nodes != nil
	// While serving, a first list that failed is tried again a period
	// later, not every round: the API server may be away for long.
	retry := !serving || o.listedAt.IsZero() || o.clock.Since(o.listedAt) >= o.baselineEvery()
	o.mu.Unlock()
	if !ready || (!listed && (!retry || !o.listNodes(ctx))) {
		return nil
	}
	if listed && o.relistDue() {
		o.listNodes(ctx) // a failure keeps the set read before
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	serving = o.serving() // the drain may have started meanwhile
	now := o.clock.Now()
	var targets map[discovery.AddressType]time.Time
	if !serving && withdrawn {
		targets = judge.Targets(o.watch.paths) // only the withdrawn case reads them
	}
	o.proofAt, o.proofTargets, o.restartWatch = time.Time{}, nil, o.restartWatch[:0]
	if o.proofsOn() && targets != nil {
		o.proofTargets = targets
	}
	for _, n := range o.nodes {
		switch {
		case n.Addr == "":
		case serving && until.IsZero(): // the baseline while serving, every node at once
			todo = append(todo, n)
		case serving:
			return o.popBaseline(now, until) // the baseline while serving, in its order
		case o.inFlight[n]: // a drain round's poll still waits for it
		case !withdrawn: // the baseline at the drain's start
			if !n.Answered() {
				todo = append(todo, n)
			}
		default:
			if v, _ := o.judging.Rule.Node(n, targets); v != judge.NodeConfirmed {
				todo = append(todo, n)
				o.noteProof(n, now)
				o.noteRestart(n, now)
			}
		}
	}
	return todo
}

// fanOut calls poll for every item, at most limit at a time, and returns
// once every call it started has returned; it starts none once ctx is done.
func fanOut[T any](ctx context.Context, limit int, items []T, poll func(T)) {
	var wg sync.WaitGroup
	defer wg.Wait()
	fanOutAt(ctx, clock.RealClock{}, make(chan struct{}, limit), &wg, items, func(T) time.Time { return time.Time{} },
		func(it T) func() { return func() { poll(it) } })
}

// pollNode reads one node's healthz and records what it said; then, with
// MetricsPort, unless healthz alone confirmed the node, it starts the read
// of the node's metrics (readMetrics) and returns without waiting for it:
// a metrics port that does not answer never holds up the round, nor the
// record of healthz's answer.
func (o *Observer) pollNode(ctx context.Context, n *judge.Node) {
	o.mu.Lock()
	o.asked.set(n, o.clock.Now())
	o.mu.Unlock()
	h, sent, received, via, err := o.http.fetch(ctx, n.Addr, o.cfg.RequestTimeout)
	if ctx.Err() != nil {
		return // shutting down: what the node said before stands
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if err != nil {
		var pe *judge.PollError
		if !errors.As(err, &pe) {
			pe = &judge.PollError{Msg: err.Error()}
		}
		if n.Failed(pe, sent, o.clock.Now()) {
			o.log.Warn("kube-proxy healthz poll failed", "node", n.Name, "addr", n.Addr, "pending", pe.Pending, "err", pe.Msg)
		}
		o.noteRestart(n, o.clock.Now())
		return
	}
	if via.reconnected {
		n.Reconnected()
	}
	n.Record(h, sent, received, o.judging.Rule.For(n).Allowance, via.kept)
	if !o.serving() && o.log.Enabled(ctx, slog.LevelDebug) {
		o.log.Debug("kube-proxy healthz answered", "node", n.Name, "rtt", received.Sub(sent), "current", h.CurrentTime, "families", h.Families, "kept", via.kept, "reconnected", via.reconnected)
	}
	if o.serving() || o.confirmed(n, received.Sub(sent)) {
		return // no metrics while serving (baseline.go)
	}
	o.startMetrics(ctx, n)
}

// startMetrics starts the read of n's metrics after a healthz answer,
// unless the witness is off, the node's metrics are off or already being
// read, or Concurrency metrics requests are in flight (the next answer
// tries again). Called with o.mu held.
func (o *Observer) startMetrics(ctx context.Context, n *judge.Node) {
	if o.cfg.MetricsPort == 0 || o.metricsOff[n] || o.metricsBusy[n] {
		return
	}
	if at, ok := o.metricsTimedOut[n]; ok {
		// The first healthz answer since the metrics timed out: a frozen
		// kube-proxy (SIGSTOP, a paused VM) holds both, and healthz shows
		// it as a stall; one that answers healthz without a stall has a
		// metrics port that does not answer.
		delete(o.metricsTimedOut, n)
		if !n.StalledSince(at) {
			o.metricsGone(n, "no answer within "+o.cfg.MetricsTimeout.String()+" while healthz answered without a stall")
			return
		}
		n.MetricsOn()
		o.log.Info("kube-proxy metrics read again: healthz showed the node stalled when they did not answer", "node", n.Name)
	}
	select {
	case o.metricsSlots <- struct{}{}:
	default:
		return
	}
	o.metricsBusy[n] = true
	o.witnessing.Go(func() {
		defer func() { <-o.metricsSlots }()
		o.readMetrics(ctx, n)
	})
}

// readMetrics reads n's metrics within MetricsTimeout and records them
// after the healthz answer they follow. A port that refuses, or does not
// answer in time while healthz answers without a stall, is not asked
// again in the drain (said once, with the node): healthz alone judges the
// node, and the rounds do not pay a timeout per node for a witness that
// is not there. A timeout within a stall of the node (a freeze: the
// frozen matrix cells) is not held against the port (startMetrics).
func (o *Observer) readMetrics(ctx context.Context, n *judge.Node) {
	m, sent, err := o.metrics.fetch(ctx, metricsAddr(n.Addr, o.cfg.MetricsPort), o.cfg.MetricsTimeout)
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.metricsBusy, n)
	if ctx.Err() != nil {
		return
	}
	now := o.clock.Now()
	if o.isConfirmed(n) {
		o.closeMetrics(n) // healthz confirmed it meanwhile
		return
	}
	var silent *silentError
	switch {
	case errors.As(err, &silent) && silent.timedOut:
		// Not asked again unless healthz shows the node stalled (startMetrics);
		// meanwhile healthz alone judges it.
		o.metricsTimedOut[n] = now
		n.MetricsOff()
		o.log.Debug("kube-proxy metrics did not answer in time", "node", n.Name, "err", err)
	case errors.As(err, &silent):
		o.metricsGone(n, err.Error())
	case err != nil:
		// Healthz alone judges the node: a metrics answer missing proves
		// nothing either way.
		o.log.Debug("kube-proxy metrics not read", "node", n.Name, "err", err)
	default:
		switch n.RecordMetrics(m, sent, now) {
		case judge.MetricsRestarted:
			o.log.Info("kube-proxy metrics name a new process start", "node", n.Name, "start", m.ProcessStart)
		case judge.MetricsReset:
			o.log.Info("kube-proxy metrics stamp went backwards: what they said before is dropped", "node", n.Name)
		case judge.MetricsRefused:
			o.log.Debug("kube-proxy metrics refused: a stamp later than healthz's time allows", "node", n.Name)
		}
	}
	o.confirmed(n, now.Sub(sent))
}

// metricsGone turns n's metrics off for the rest of the drain (their
// port refused, or did not answer while healthz did) and says so once,
// with why. Called with o.mu held.
func (o *Observer) metricsGone(n *judge.Node, why string) {
	o.metricsOff[n] = true
	n.MetricsOff()
	o.log.Info("kube-proxy metrics not read: not asked again in this drain, healthz alone judges the node", "node", n.Name, "err", why)
}

// confirmed says whether n is confirmed now that the drain needs it, and
// when it is, logs it once and closes its kept connections: not asked
// again unless a later withdrawal needs it, its sockets and buffers would
// stay until exit. Called with o.mu held; rtt is the answer's that
// confirmed it.
func (o *Observer) confirmed(n *judge.Node, rtt time.Duration) bool {
	if !o.isConfirmed(n) {
		return false
	}
	o.log.Info("kube-proxy confirmed the withdrawal", "node", n.Name, "rtt", rtt,
		"witness", o.judging.Rule.Witness(n, judge.Targets(o.watch.paths)))
	o.http.closeIdle(n.Addr)
	o.conns.close(n.Addr)
	o.closeMetrics(n)
	return true
}

// isConfirmed says whether the drain needs n and n is confirmed; a
// baseline confirms nothing, its connection kept for the polls to come.
// Called with o.mu held.
func (o *Observer) isConfirmed(n *judge.Node) bool {
	if !judge.APIWithdrawn(o.watch.paths) {
		return false
	}
	v, _ := o.judging.Rule.Node(n, judge.Targets(o.watch.paths))
	return v == judge.NodeConfirmed
}

// closeMetrics closes n's kept metrics connection, if any.
func (o *Observer) closeMetrics(n *judge.Node) {
	if o.cfg.MetricsPort != 0 && !o.metricsBusy[n] {
		ma := metricsAddr(n.Addr, o.cfg.MetricsPort)
		o.metrics.closeIdle(ma)
		o.conns.close(ma)
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
