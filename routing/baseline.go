package routing

import (
	"cmp"
	"hash/fnv"
	"runtime/debug"
	"slices"
	"time"

	"github.com/hapsuper/hapsuper/routing/judge"
)

// The baseline while the pod serves (Config.BaselinePeriod). Before any
// drain, every node's kube-proxy is asked once a period, each at its own
// instant of the period (spread by the node's name) and a little earlier
// each time (jittered), over the connection the answer before came on.
// When the drain starts, each node has answered on a connection kept
// open: a lastUpdated new on it is a sync of the process that answered
// before, not a restarted kube-proxy's start stamp (judge's firstAnswer),
// and no sweep of every node stands between the withdrawal and the first
// poll that can confirm.
//
// What it costs, bounded: one connection per node's kube-proxy (the one
// healthz keeps), a node's facts (the judge keeps a sync or two a
// family), and a poll per node per period, at most baselineRate nodes a
// second however many nodes there are. Metrics are not read while
// serving (their answer is 100-300 KB); the witness starts at the drain.
// The node list is read again every baselineRelist periods: nodes that
// come are spread over the next period, nodes that go are forgotten and
// their connections closed (listNodes); the drain reads it again anyway. A kube-proxy that restarts closes
// the kept connection: the next poll reconnects, and the answer after it
// on the new connection ties the new process (Node.Reconnected). An API
// server that does not answer leaves the nodes as last listed; a first
// list that failed is tried again once a period.

// baselineRelist is how many baseline periods pass between two reads of
// the node list while serving: a list of 1,000 full Node objects costs
// more CPU than a period's polls of them.
const baselineRelist = 5

// baselineRate bounds the nodes asked a second while the pod serves: at
// tens of µs of CPU per poll on a kept connection, a few tenths of a
// millisecond of CPU a second.
const baselineRate = 50

// serving says the drain has not started: no stop request and the pod not
// being deleted. Called with o.mu held.
func (o *Observer) serving() bool { return o.stopAt.IsZero() && !o.watch.deleting }

// baselineOn says the nodes are asked while the pod serves.
func (o *Observer) baselineOn() bool {
	return o.cfg.Mode == ModeKubeProxy && o.cfg.BaselinePeriod > 0
}

// baselineEvery is how often each node is asked while the pod serves:
// BaselinePeriod, longer where the nodes are more than baselineRate a
// second of it. Called with o.mu held.
func (o *Observer) baselineEvery() time.Duration {
	return max(o.cfg.BaselinePeriod, time.Duration(len(o.nodes))*time.Second/baselineRate)
}

// baselineDue is when n is next asked while the pod serves: a period
// after it was last asked, less a jitter of up to a fifth of it, so that
// polls set off together drift apart; a node never asked is placed at an
// instant of the period from now chosen by its name, evenly, so that the
// first pass asks no more nodes a second than the next ones. Called with
// o.mu held.
func (o *Observer) baselineDue(n *judge.Node, now time.Time) time.Time {
	every := o.baselineEvery()
	jitter := spread(n.Name, int64(o.baseline.passes), every/5)
	asked, ok := o.asked.get(n)
	if !ok {
		// A poll never made, placed so that this pass asks the node at
		// now + spread, and a drain at once (nodeDue): never later than a
		// poll interval ago.
		asked = minTime(now.Add(-every-o.cfg.PollInterval+spread(n.Name, 0, every)+jitter), now.Add(-o.cfg.PollInterval))
		o.asked.set(n, asked)
	}
	return asked.Add(every - jitter)
}

// spread is a duration in [0, d) chosen by name and seed, the same for the
// same.
func spread(name string, seed int64, d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	h := fnv.New64a()
	h.Write([]byte(name))
	var b [8]byte
	for i := range b {
		b[i] = byte(seed >> (8 * i))
	}
	h.Write(b[:])
	return time.Duration(h.Sum64() % uint64(d))
}

// baselineQueue is the nodes in the order of their next baseline poll,
// built once a pass over every node (and again after the node list
// changed), so that a round while serving costs the nodes it asks, not
// a look at every node.
type baselineQueue struct {
	nodes []*judge.Node
	// due is when each is due, as an offset from built: 8 bytes a node
	// where a time.Time takes 24.
	due   []time.Duration
	built time.Time
	stale bool // the node list changed: build it again
	// budget is how many nodes may be asked now: baselineRate a second
	// accrued since poppedAt, at most baselineBurst (or a round's worth),
	// so that passes that overlap (the first is spread by name, the next
	// ones by when each node was asked) never ask more than that.
	budget   float64
	poppedAt time.Time
	// passes counts the queues built; freeOS asks Run, once the first
	// pass is over, to return the heap it left free (releaseFirstPass).
	passes int
	freeOS bool
}

// baselineBurst is the most nodes the baseline asks at once, a fifth of
// a second's worth, unless Run's rounds come further apart (a round's
// worth then, or the rate would fall short).
const baselineBurst = baselineRate / 5

// popBaseline returns the nodes whose baseline poll is due before the
// middle of the round from now to until (the next round's start), so that
// each is asked in the round nearest its instant, as many as the budget
// allows (the rest wait for the next round), building the queue first
// when it is empty or stale. Called with o.mu held.
func (o *Observer) popBaseline(now, until time.Time) (todo []*judge.Node) {
	until = now.Add(until.Sub(now) / 2)
	q := &o.baseline
	if len(q.nodes) == 0 || q.stale {
		if q.passes++; q.passes == 2 {
			q.freeOS = true
		}
		q.nodes, q.due, q.stale, q.built = q.nodes[:0], q.due[:0], false, now
		for _, n := range o.nodes {
			if n.Addr != "" {
				q.nodes = append(q.nodes, n)
			}
		}
		due := make(map[*judge.Node]time.Time, len(q.nodes))
		for _, n := range q.nodes {
			due[n] = o.baselineDue(n, now)
		}
		slices.SortFunc(q.nodes, func(a, b *judge.Node) int { return cmp.Or(due[a].Compare(due[b]), cmp.Compare(a.Name, b.Name)) })
		for _, n := range q.nodes {
			q.due = append(q.due, due[n].Sub(now))
		}
	}
	// At most a burst, or what accrued since the round before where
	// rounds are further apart (servingRound's worth), never more than
	// a serving round's worth: budget left unused is not saved
	// up for a burst later.
	var since time.Duration // the first round: a burst
	if !q.poppedAt.IsZero() {
		since = min(max(now.Sub(q.poppedAt), 0), servingRound)
	}
	most := max(baselineBurst, baselineRate*since.Seconds())
	q.budget = min(q.budget+baselineRate*since.Seconds(), most)
	if q.poppedAt.IsZero() {
		q.budget = most
	}
	q.poppedAt = now
	i := 0
	for ; i < len(q.nodes) && q.built.Add(q.due[i]).Before(until) && q.budget >= 1; i++ {
		if n := q.nodes[i]; o.nodes[n.Name] == n {
			q.budget--
			todo = append(todo, n)
			// Asked now, as far as the next pass is concerned: the
			// queue is built again from these once it is empty.
			o.asked.set(n, now)
		}
	}
	clear(q.nodes[:i])
	q.nodes, q.due = q.nodes[i:], q.due[i:]
	return todo
}

// releaseFirstPass returns to the system, once, the heap the baseline's
// first pass left free: the node list's pages (a page of 250 full Node
// objects at a time) and the first answers' garbage, which the runtime
// would hand back only over minutes; as Run does after the watch's
// initial lists, for a few ms. Called without o.mu.
func (o *Observer) releaseFirstPass() {
	o.mu.Lock()
	free := o.baseline.freeOS
	o.baseline.freeOS = false
	o.mu.Unlock()
	if free {
		debug.FreeOSMemory()
	}
}

// minTime is the earlier of a and b.
func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// maxTime is the later of a and b.
func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
