package routing

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"

	"github.com/hapsuper/hapsuper/routing/judge"
)

// The schedule of Run's confirmation polls. confirmRound asks every node
// it selects at once; Run's rounds (scheduledRound) ask each node no
// sooner than pollEvery after it was last asked, so that a drain over
// thousands of nodes asks each once per interval, not once per round: the
// stop request and the pod's deletion both kick a round, and a round over
// thousands of nodes can outlast the interval; each asked every pending
// node again at once. A round covers the nodes due before the next tick
// and starts each at its instant (fanOutAt): one that becomes due
// mid-round is asked then, not a whole interval later.
//
// A node is not held back further, for instance until R + D after the
// withdrawal, before which no answer can confirm it: an answer then can
// still show kube-proxy frozen (a slow or missing answer), and a sync that
// completes after such a stall is judged against its end (judge.Node's
// stalls).

// pollRate bounds the nodes asked a second when they are asked more often
// than every PollInterval: at about 350 µs of CPU per node asked (both
// endpoints, docs/benchmarks.md) a seventh of a core, for the seconds of a
// drain, and 5 requests a second from each draining pod on each node.
const pollRate = 400

// pollEvery is how often a node is asked: as often as MinPollInterval
// while the nodes number fewer than pollRate in that time, less often as
// they grow, every PollInterval at most. Confirmation waits for the poll
// after a node's sync, half an interval on average: where polls are cheap
// (few nodes) they come sooner. Called with o.mu held.
func (o *Observer) pollEvery() time.Duration {
	c := o.cfg
	if c.MinPollInterval == 0 || c.MinPollInterval >= c.PollInterval {
		return c.PollInterval
	}
	byRate := time.Duration(len(o.nodes)) * time.Second / pollRate
	return min(c.PollInterval, max(c.MinPollInterval, byRate))
}

// tickEvery is the period of Run's rounds: the shortest pollEvery.
func (o *Observer) tickEvery() time.Duration {
	if c := o.cfg; c.MinPollInterval > 0 && c.MinPollInterval < c.PollInterval {
		return c.MinPollInterval
	}
	return o.cfg.PollInterval
}

// servingRound is the period of Run's rounds while the pod serves
// (serving) with the baseline on: a round then has nothing to do but the
// baseline (baseline.go), which asks the nodes due within it together, so
// that the runtime wakes once every few seconds, not ten times a second,
// and the polls' answers come back together: a wake-up of an idle Go
// process costs about as much CPU as a poll on a kept connection, and the
// rounds' own wake-ups were half of what the baseline cost at 1,000 nodes
// with a round a second (docs/benchmarks.md). Nothing waits on a serving
// round: the stop request and the pod's deletion start a round at once
// (kickRound), and a node is asked in the round nearest its instant
// (popBaseline).
const servingRound = 5 * time.Second

// servingRoundsAPeriod is the fewest serving rounds in a baseline period:
// a node is asked within half a round of its instant, an eighth of a
// period at most where the period is short.
const servingRoundsAPeriod = 8

// servingIdleRound is the period of Run's rounds while the pod serves with
// the baseline off: such a round asks nothing, and the stop request and
// the pod's deletion start one at once.
const servingIdleRound = time.Minute

// roundEvery is the period of Run's next round: servingRound while the
// pod serves, or an eighth of the baseline's period where that is
// shorter (servingIdleRound without the baseline), tickEvery from the
// drain on.
func (o *Observer) roundEvery() time.Duration {
	o.mu.Lock()
	defer o.mu.Unlock()
	switch {
	case o.serving() && !o.baselineOn():
		return servingIdleRound
	case o.serving():
		return max(min(servingRound, o.baselineEvery()/servingRoundsAPeriod), o.tickEvery())
	}
	return o.tickEvery()
}

// untilNextRound is how long Run waits after the round that started at
// start: roundEvery from that start, or less to start one at proofAt.
func (o *Observer) untilNextRound(start time.Time) time.Duration {
	d := max(0, o.roundEvery()-o.clock.Since(start))
	o.mu.Lock()
	defer o.mu.Unlock()
	if p := o.proofAt.Sub(o.clock.Now()); p > 0 && p < d {
		d = p
	}
	return d
}

// nodeDue is when n is next asked; called with o.mu held.
func (o *Observer) nodeDue(n *judge.Node) time.Time {
	if o.serving() && o.baselineOn() {
		return time.Time{} // due now: popBaseline chose it
	}
	asked, _ := o.asked.get(n) // zero: never asked, due at once
	if asked.IsZero() {
		return asked
	}
	due := asked.Add(o.pollEvery())
	if slices.Contains(o.restartWatch, n) {
		due = minTime(due, asked.Add(restartPollEvery))
	}
	if o.proofTargets != nil {
		if p := o.judging.Rule.FirstProof(n, o.proofTargets); !p.IsZero() && asked.Before(p) && p.Before(due) {
			due = p
		}
	}
	return due
}

// proofsOn says whether a pending node is also asked at the first instant
// an answer can prove a sync that ran right after the withdrawal
// (judge.Rule.FirstProof: D past our receipt, or past a stall's
// catch-up), where it comes before the node's next turn: with the metrics
// witness read (the queued-change rule is theirs) and nodes few enough to
// be asked all at once within pollRate. Such a sync completes within tens
// of ms of the receipt or of a frozen kube-proxy's resume, and at the
// rounds' pace the proof waited up to a poll interval more. Called with
// o.mu held.
func (o *Observer) proofsOn() bool {
	return o.cfg.MetricsPort != 0 && o.fewNodes()
}

// fewNodes says the nodes are few enough to be asked all at once every
// MinPollInterval within pollRate (80 at 200 ms), where the schedule may
// ask a node between its turns. Called with o.mu held.
func (o *Observer) fewNodes() bool {
	c := o.cfg
	return c.MinPollInterval > 0 && len(o.nodes) <= int(int64(pollRate)*int64(c.MinPollInterval)/int64(time.Second))
}

// noteProof keeps in proofAt the earliest proof instant after now of the
// pending nodes, for Run to start a round then (untilNextRound). Called
// with o.mu held.
func (o *Observer) noteProof(n *judge.Node, now time.Time) {
	if o.proofTargets == nil {
		return
	}
	o.wakeAt(o.judging.Rule.FirstProof(n, o.proofTargets), now)
}

// A kube-proxy that restarts stamps its start before its first sync, and
// an answer that shows a stamp first after a refused poll, an answer that
// told nothing or a closed connection cannot be told from that start
// stamp: only a later one on the same connection is a sync (judge's
// startStamp). The new process's first sync comes once its informers
// have listed: through real kube-proxy restarted 6 times, its healthz
// answered 0.21–0.25 s after the new process started, the start stamp
// within 4 ms of its first answer, the first sync 130–154 ms after the
// stamp. A node asked every 200 ms then shows the first sync first about
// a third of the time, and is held until its next one, which may never
// come before the bound. So a pending node awaiting a stamp
// (judge.Node.AwaitsStamp: refused, told nothing or reconnected since its
// last stamped answer) is asked every restartPollEvery, where the nodes
// are few (fewNodes), at most restartWatchNodes at once: an
// answer then falls between the start stamp and the first sync, and that
// sync, on the same connection, is one. A timed-out poll is not this: its
// connection waits for the same process. The judgement is unchanged; only
// the answers come more often.
const (
	restartPollEvery  = 20 * time.Millisecond
	restartWatchNodes = 4
)

// noteRestart adds n to restartWatch when it awaits a stamp, the nodes
// are few and fewer than restartWatchNodes are watched, and keeps in
// proofAt its next instant, for Run to start a round then: by the round
// (confirmTodo), and by the poll that found it so (pollNode), whose round
// had judged the node before. Called with o.mu held.
func (o *Observer) noteRestart(n *judge.Node, now time.Time) {
	if o.serving() || !o.fewNodes() || !n.AwaitsStamp() {
		return // while serving, no drain to shorten
	}
	if !slices.Contains(o.restartWatch, n) {
		if len(o.restartWatch) >= restartWatchNodes {
			return
		}
		o.restartWatch = append(o.restartWatch, n)
	}
	asked, _ := o.asked.get(n)
	o.wakeAt(asked.Add(restartPollEvery), now)
}

// wakeAt keeps in proofAt the earliest instant after now a round is
// wanted at: p, where it comes before the one kept or that one has passed
// (a round that waited for a node's instant asked it after its own start,
// and the instant it noted then is behind it). Called with o.mu held.
func (o *Observer) wakeAt(p, now time.Time) {
	if p.After(now) && (!o.proofAt.After(now) || p.Before(o.proofAt)) {
		o.proofAt = p
	}
}

// scheduledRound is Run's confirmation round: it asks the nodes that
// confirmRound would, each at its due instant (nodeDue) when that comes
// before until. A round while the pod serves returns once its requests
// have ended. A drain's round returns once they have ended or until has
// come, whichever is first: a node that does not answer (a filter, a
// frozen kube-proxy) holds its own poll for RequestTimeout, not the next
// round, where the other nodes' polls are due — a restart watched every
// restartPollEvery, or a node due every MinPollInterval. Nor does a node
// due later in the round hold a restart watched: a poll that wants a
// round before the next node's instant ends the round's fan-out there
// (wantedBefore), and the next round asks both. Its polls go on
// (inFlight, pollSlots, polling), and one that ends after its round and
// wants a round sooner than the next tick kicks one (pollEnded). again:
// the round stopped waiting at the instant an answer wanted the next
// round at (proofAt), which Run then starts at once.
func (o *Observer) scheduledRound(ctx context.Context, until time.Time) (again bool) {
	todo := o.confirmTodo(ctx, until)
	if len(todo) == 0 {
		return false
	}
	o.mu.Lock()
	serving := o.serving()
	due := make(map[*judge.Node]time.Time, len(todo))
	keep := todo[:0]
	for _, n := range todo {
		if d := o.nodeDue(n); d.Before(until) {
			due[n] = d
			keep = append(keep, n)
		}
	}
	o.mu.Unlock()
	slices.SortFunc(keep, func(a, b *judge.Node) int {
		return cmp.Or(due[a].Compare(due[b]), cmp.Compare(a.Name, b.Name))
	})
	dueOf := func(n *judge.Node) time.Time { return due[n] }
	if serving {
		var wg sync.WaitGroup
		fanOutAt(ctx, o.clock, make(chan struct{}, min(o.cfg.Concurrency, baselineConcurrency)), &wg, keep, dueOf,
			func(n *judge.Node) func() {
				return func() {
					if o.stillServing() {
						o.pollNode(ctx, n)
					} // else the drain's own round asks the node at once
				}
			})
		wg.Wait()
		return false
	}
	var over atomic.Bool // the round has returned
	ended := make(chan struct{}, len(keep))
	// A poll whose answer wants a round before the next node's instant (a
	// refusal watched every restartPollEvery) cuts the fan-out there: the
	// nodes not started yet are the next round's, which starts then.
	fanning, cut := context.WithCancel(ctx)
	defer cut()
	var startedN atomic.Int64
	started := fanOutAt(fanning, o.clock, o.pollSlots, &o.polling, keep, dueOf, func(n *judge.Node) func() {
		o.mu.Lock()
		o.inFlight[n] = true // before the next round's confirmTodo: it starts after this returns
		o.mu.Unlock()
		startedN.Add(1)
		return func() {
			o.pollNode(ctx, n)
			o.pollEnded(n, over.Load())
			if i := int(startedN.Load()); i < len(keep) && o.wantedBefore(due[keep[i]]) {
				cut()
			}
			ended <- struct{}{}
		}
	})
	defer over.Store(true)
	// Wait for the polls until the next round is wanted: until, or sooner
	// where an answer asked for one (proofAt: a refusal of a node watched
	// for its restart).
	wake := func() (time.Duration, bool) {
		o.mu.Lock()
		defer o.mu.Unlock()
		now := o.clock.Now()
		if o.proofAt.After(now) && o.proofAt.Before(until) {
			return o.proofAt.Sub(now), true
		}
		return max(0, until.Sub(now)), false
	}
	d, early := wake()
	t := o.clock.NewTimer(d)
	defer t.Stop()
	for left := started; left > 0; left-- {
		select {
		case <-ended:
			t.Stop()
			d, early = wake()
			t.Reset(d)
		case <-t.C():
			return early
		case <-ctx.Done():
			return false
		}
	}
	return false
}

// wantedBefore says a round is wanted (proofAt) after now and before t.
func (o *Observer) wantedBefore(t time.Time) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.proofAt.After(o.clock.Now()) && o.proofAt.Before(t)
}

// pollEnded notes that a drain round's poll to n has returned; after its
// round (late), it kicks a round when one is wanted before the next tick
// (proofAt: a restart watched, a first proof), which Run's wait, set when
// the round returned, does not know of.
func (o *Observer) pollEnded(n *judge.Node, late bool) {
	o.mu.Lock()
	delete(o.inFlight, n)
	wake := late && o.proofAt.After(o.clock.Now())
	o.mu.Unlock()
	if wake {
		o.kickRound()
	}
}

// baselineConcurrency bounds the baseline's requests in flight while the
// pod serves: a wait for an answer on a parked socket holds its thread
// (parked.go), and the runtime keeps every thread it made, so a round's
// worth of polls (250 at 5,000 nodes) at Concurrency would leave the
// process Concurrency threads for good. A round whose polls wait on nodes
// that do not answer holds the drain's first round up by RequestTimeout at
// most: once the drain has started, the rest of it is not asked.
const baselineConcurrency = 4

// stillServing says the drain has not started (serving).
func (o *Observer) stillServing() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.serving()
}

// fanOutAt is fanOut for items due at instants of clk, sorted by them: it
// starts each no sooner than its instant, as a slot of sem frees (at most
// cap(sem) at a time), counted in wg, and returns how many it started once
// it has started them all or ctx is done; it does not wait for them. start
// is called on fanOutAt's goroutine as an item starts, and returns what
// the item's own goroutine runs.
func fanOutAt[T any](ctx context.Context, clk clock.Clock, sem chan struct{}, wg *sync.WaitGroup, items []T, due func(T) time.Time, start func(T) func()) (started int) {
	for _, it := range items {
		if d := due(it).Sub(clk.Now()); d > 0 {
			t := clk.NewTimer(d)
			select {
			case <-t.C():
			case <-ctx.Done():
				t.Stop()
				return started
			}
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			return started
		}
		started++
		run := start(it)
		wg.Go(func() {
			defer func() { <-sem }()
			run()
		})
	}
	return started
}

// forgetAsked drops the schedule, and the metrics once failed, of nodes
// no longer in the set; called
// with o.mu held.
func (o *Observer) forgetAsked() {
	for n := range o.asked.at {
		if o.nodes[n.Name] != n {
			delete(o.asked.at, n)
			delete(o.metricsOff, n)
			delete(o.metricsTimedOut, n)
		}
	}
}

// askedTimes is when each node was last asked, as offsets from an epoch:
// 8 bytes a node where a time.Time is 24, kept for thousands of nodes.
type askedTimes struct {
	epoch time.Time
	at    map[*judge.Node]time.Duration
}

// get is when n was last asked; zero and false when it never was.
func (a *askedTimes) get(n *judge.Node) (time.Time, bool) {
	d, ok := a.at[n]
	if !ok {
		return time.Time{}, false
	}
	return a.epoch.Add(d), true
}

// set notes n asked at t.
func (a *askedTimes) set(n *judge.Node, t time.Time) { a.at[n] = t.Sub(a.epoch) }
