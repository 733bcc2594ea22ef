package routing

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/hapsuper/hapsuper/routing/judge"
)

// The schedule of Run's confirmation polls. confirmRound asks every node
// it selects at once; Run's rounds (scheduledRound) ask each node when its
// answer can next matter, so that a drain over thousands of nodes asks
// each a few times, not once per round:
//
//   - not sooner than PollInterval after the node was last asked: a round
//     that outlasts the interval, or a kick (the stop request and the
//     pod's deletion both kick), does not ask it again at once;
//   - once the API says withdrawn, a node that has answered is not asked
//     before R + D (R the latest receipt among the families' changes, D
//     the sync allowance). Before that no answer can confirm it: rule 1
//     and the pending rule both need a request sent at or after R + D
//     (Cmin is at most a request's sending), and the silence rule's
//     second answer comes at least 3D − 250 ms after R (Lag + D ≤
//     MinSync): the gate delays it by less than D at worst. What an
//     earlier answer could tell (a failure, a restart) the answer at R + D
//     tells too: the baseline's kept connection is closed by a restart
//     whenever it comes. A node that never answered is not gated, so that
//     its connection is made before its sync.
//
// A round covers the nodes due before the next tick and starts each at
// its instant (fanOutAt): one that becomes due mid-round is asked then,
// not a whole interval later.

// nodeDue is when n is next asked; called with o.mu held. gate is R + D
// once the API says withdrawn, zero before.
func (o *Observer) nodeDue(n *judge.Node, gate time.Time) time.Time {
	due := o.asked[n] // zero: never asked, due at once
	if !due.IsZero() {
		due = due.Add(o.cfg.PollInterval)
	}
	if n.Answered() && due.Before(gate) {
		due = gate
	}
	return due
}

// scheduledRound is Run's confirmation round: it asks the nodes that
// confirmRound would, each at its due instant (nodeDue) when that comes
// before until, and returns once those requests have ended.
func (o *Observer) scheduledRound(ctx context.Context, until time.Time) {
	todo, withdrawn := o.confirmTodo(ctx)
	if len(todo) == 0 {
		return
	}
	o.mu.Lock()
	var gate time.Time
	if withdrawn {
		for _, r := range judge.Targets(o.watch.paths) {
			gate = maxTime(gate, r.Add(o.judging.Rule.Allowance))
		}
	}
	due := make(map[*judge.Node]time.Time, len(todo))
	keep := todo[:0]
	for _, n := range todo {
		if d := o.nodeDue(n, gate); d.Before(until) {
			due[n] = d
			keep = append(keep, n)
		}
	}
	o.mu.Unlock()
	slices.SortFunc(keep, func(a, b *judge.Node) int {
		return cmp.Or(due[a].Compare(due[b]), cmp.Compare(a.Name, b.Name))
	})
	fanOutAt(ctx, o.clock, o.cfg.Concurrency, keep, func(n *judge.Node) time.Time { return due[n] },
		func(n *judge.Node) { o.pollNode(ctx, n) })
}

// fanOutAt is fanOut for items due at instants of clk, sorted by them: it
// starts each no sooner than its instant, at most limit at a time, and
// returns once every call it started has returned; it starts none once
// ctx is done.
func fanOutAt[T any](ctx context.Context, clk clock.Clock, limit int, items []T, due func(T) time.Time, poll func(T)) {
	sem := make(chan struct{}, limit)
	var wg sync.WaitGroup
	defer wg.Wait()
	for _, it := range items {
		if d := due(it).Sub(clk.Now()); d > 0 {
			t := clk.NewTimer(d)
			select {
			case <-t.C():
			case <-ctx.Done():
				t.Stop()
				return
			}
		}
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

// forgetAsked drops the schedule of nodes no longer in the set; called
// with o.mu held.
func (o *Observer) forgetAsked() {
	for n := range o.asked {
		if o.nodes[n.Name] != n {
			delete(o.asked, n)
		}
	}
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
