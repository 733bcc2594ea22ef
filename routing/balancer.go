package routing

// The shell's side of the external paths (judge/balancer.go judges them):
// from the stop on, every poll interval, the observer asks the node's
// health check itself, as the load balancer does, and records each answer
// in a judge.CheckState.

import (
	"context"
	"slices"
	"strings"

	"github.com/hapsuper/hapsuper/routing/judge"
)

// balancerTargets are the health checks the external paths need asked,
// and the pod's node address they go to. Called with o.mu held.
func (o *Observer) balancerTargets() (map[judge.CheckKey][]string, string) {
	out := map[judge.CheckKey][]string{}
	for k, p := range o.watch.paths {
		if !p.Withdrawn || p.Balancer == nil {
			continue
		}
		if !o.watch.hostIP.IsValid() {
			return nil, "the pod's hostIP is not known yet"
		}
		ck := judge.CheckKey{Addr: o.watch.hostIP, Port: p.Balancer.Port}
		if !slices.Contains(out[ck], k.Service) {
			out[ck] = append(out[ck], k.Service)
		}
	}
	return out, ""
}

// balancerRound asks each health check an external path needs, once the
// stop is requested, at most Concurrency at a time. It returns when every
// request has ended, each within RequestTimeout.
func (o *Observer) balancerRound(ctx context.Context) {
	o.mu.Lock()
	if o.cfg.Mode == ModeOff || !o.synced || o.stopAt.IsZero() {
		o.mu.Unlock()
		return
	}
	targets, _ := o.balancerTargets()
	for k := range o.lbNodeChecks {
		if _, ok := targets[k]; !ok {
			delete(o.lbNodeChecks, k) // no longer needed: a later need starts afresh
		}
	}
	o.mu.Unlock()
	keys := make([]judge.CheckKey, 0, len(targets))
	for k := range targets {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b judge.CheckKey) int { return strings.Compare(a.URL(), b.URL()) })
	fanOut(ctx, o.cfg.Concurrency, keys, func(k judge.CheckKey) { o.pollCheck(ctx, k, targets[k][0]) })
}

// pollCheck asks one health check and records the answer.
func (o *Observer) pollCheck(ctx context.Context, k judge.CheckKey, service string) {
	rctx, cancel := context.WithTimeout(ctx, o.cfg.RequestTimeout)
	addr := k.AddrPort().String()
	status, body, err := o.http.getPath(rctx, addr, "/")
	cancel()
	if ctx.Err() != nil {
		return // shutting down
	}
	now := o.clock.Now()
	failing, answer := false, ""
	if err != nil {
		answer = "no answer: " + classify(addr, err, o.cfg.RequestTimeout).Msg
	} else {
		failing, answer = judge.ReadServiceHealth(status, body, o.cfg.Identity.Namespace, service)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.lbNodeChecks == nil {
		o.lbNodeChecks = map[judge.CheckKey]*judge.CheckState{}
	}
	st := o.lbNodeChecks[k]
	if st == nil {
		st = &judge.CheckState{}
		o.lbNodeChecks[k] = st
	}
	switch began, ended := st.Saw(failing, answer, now); {
	case began:
		o.log.Info("load balancer health check of the node failing", "service", service, "url", k.URL(), "answer", answer)
	case ended:
		o.log.Info("load balancer health check of the node no longer seen failing", "service", service, "url", k.URL(), "answer", answer)
	}
}
