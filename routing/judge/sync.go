package judge

import (
	"fmt"
	"math"
	"sync"
	"time"

	discovery "k8s.io/api/discovery/v1"
)

// NodeVerdict is one node's answer to "does your kube-proxy route new
// connections to this pod?", worst last.
type NodeVerdict int

// The node verdicts.
const (
	NodeConfirmed  NodeVerdict = iota // its last sync provably holds the withdrawal
	NodeUnverified                    // cannot be observed
	NodePending                       // may still route here
)

// syncFacts is what is known of one kube-proxy sync of one family, the one
// whose node-clock lastUpdated it holds. Polls that see the same sync narrow
// the bounds; a poll that sees another sync replaces the facts.
type syncFacts struct {
	// lastUpdated, in the node's clock as Unix ns, identifies the sync:
	// 8 bytes, not a time.Time's 24, kept for thousands of nodes.
	lastUpdated int64
	// earliest and latest bound the sync's completion in our clock: the node
	// read currentTime at some instant between our request and its answer,
	// so completion ∈ [sent − age, received − age], age = currentTime −
	// lastUpdated. Each poll's interval holds it; their intersection too.
	// Instants, 8 bytes each (times read by earliestAt and latestAt).
	earliest, latest instant
	age              time.Duration // largest currentTime − lastUpdated seen
	// silent is how long kube-proxy provably ran after this sync without
	// running another: the largest age of an answer followed, for the same
	// sync, by another answer at least `settle` (D) later in the node's
	// clock, both quick (back within quickAnswer: kube-proxy was running
	// when it served them). At the first answer a sync owed then was
	// overdue and kube-proxy was running; by the second it would have
	// completed. One answer is not enough: a request that waited in the
	// listen backlog of a frozen kube-proxy is served the instant it
	// resumes, before its sync loop runs — and comes back slow.
	silent time.Duration
	// recent are the ages of quick answers not yet `settle` behind the
	// latest one, oldest first: candidates for silent.
	recent []time.Duration
	// lastQuick is when (our clock) the latest quick answer showing this
	// sync was sent: kube-proxy was running then and had completed no
	// newer sync (witness.go's pendingQuiet). noInstant: none.
	lastQuick instant
	healthy   bool
	// startStamp: first seen after a failed poll, this lastUpdated may be
	// a restarted kube-proxy's start rather than a sync (Node.failed).
	startStamp bool
	// firstAnswer: first seen in the first answer on a connection, with no
	// failure before it. A kube-proxy restarted before that connection was
	// made left no earlier connection to lose and no poll to fail, so this
	// lastUpdated, too, may be a start stamp: it cannot confirm by being
	// late (judge), only a later one on the same connection can.
	firstAnswer bool
	// stepped: two polls of this sync disagreed beyond stepTolerance; the
	// node's clock was stepped and its ages are not trusted.
	stepped bool
	// metricsSync: kube-proxy's metrics, read from the process that
	// answered healthz, hold a successful sync stamped with this
	// lastUpdated (witness.go): it is a sync, not a start stamp.
	metricsSync bool
	// v6: the family is IPv6, else IPv4 (the only two healthz reports).
	v6 bool
}

// family is the sync's address family.
func (f *syncFacts) family() discovery.AddressType {
	if f.v6 {
		return discovery.AddressTypeIPv6
	}
	return discovery.AddressTypeIPv4
}

// firstOnConn is connFirst as a time; zero when no answer came.
func (n *Node) firstOnConn() time.Time {
	if n.connFirst == 0 {
		return time.Time{}
	}
	return time.Unix(0, n.connFirst)
}

// updated is lastUpdated as a time.
func (f *syncFacts) updated() time.Time { return time.Unix(0, f.lastUpdated) }

// quickAnswer bounds the round trip of an answer that proves kube-proxy was
// running: measured healthz round trips were 12 ms median, 322 ms worst under
// load; an answer held in the backlog of a frozen kube-proxy comes back when
// it resumes, up to the request timeout later.
const quickAnswer = 250 * time.Millisecond

// maxRecent bounds the candidates kept per sync; at the shortest poll
// interval a window of D holds far fewer.
const maxRecent = 64

// stall is an interval in which the node may not have been running: from
// the sending of a request that came back slow or not at all to its end.
type stall struct {
	from, to time.Time
	// timedOut: a poll sent at from had no answer within the request's
	// timeout (the node frozen, or its packets dropped), not a slow one.
	timedOut bool
}

// caughtUp is when a kube-proxy that resumed at the stall's end has read
// what it missed: after the stall's length, at most catchUp (Node.reference).
func (s stall) caughtUp(catchUp time.Duration) time.Time {
	return s.to.Add(min(s.to.Sub(s.from), catchUp))
}

// maxStalls bounds the stalls kept per node; the oldest are merged.
const maxStalls = 16

// Node is what is known of one node's kube-proxy, from the answers of its
// healthz (Record) and the polls that failed (Failed).
type Node struct {
	Name string
	Addr string // host:port of its healthz; empty when it has none

	// syncs holds a family's sync or two, not a map: a node's facts are
	// kept for thousands of nodes at once.
	syncs   []syncFacts
	problem *PollError // the last poll's failure; nil after an answer
	// stalls are the times the node was seen not running: a poll that
	// timed out, or an answer slower than quickAnswer (held while
	// kube-proxy was frozen). A kube-proxy that did not run did not read
	// its watch either: once it resumes, its first sync may still lack a
	// change we received long before. So a sync that may have completed
	// after a stall began is judged as if the change had arrived at the
	// stall's end, when that is later. A sync that completed before the
	// request was sent is unaffected: it holds what it held.
	stalls []stall
	// stalledFrom: a poll sent then timed out unanswered, and no answer has
	// come since. The node did not run at the timeout, and it resumed at
	// some instant before the next answer, however quick that answer: the
	// stall lasts until that answer is in (Record).
	stalledFrom instant
	// connFirst is the node-clock currentTime of the first answer on the
	// connection healthz answers on now: the process that answers there
	// had started by then (witness.go's same-process test).
	// Unix ns, 0 until an answer came: 8 bytes, not a time.Time's 24.
	connFirst int64
	// metrics is what kube-proxy's metrics said (witness.go); nil until
	// they are read (never, without the witness, nor while serving).
	metrics *metricsFacts
	// healthzAhead is how far the node's clock was ahead of ours at the
	// last healthz answer: its currentTime less its request's sending
	// (RecordMetrics bounds the metrics' stamps read after it by it).
	healthzAhead time.Duration

	answered bool // healthz answered at least once
	// failed says a poll failed since the last answer: kube-proxy may have
	// restarted in between, unless the next answer comes over a connection
	// that answered before (record's sameProcess). At start its sync loop stamps lastUpdated
	// before its first sync (pkg/proxy/*/proxier.go SyncLoop), while the
	// old instance's rules still pick the pod: the first lastUpdated seen
	// after a failure is a start stamp unless it is the one seen before.
	failed bool
	// connStamped: the connection that answers now carried an answer with
	// per-family stamps, and no answer since told nothing. A restarted kube-proxy
	// answers without per-family status until its sync loop starts, then
	// with its start stamp, on the same connection: an answer that told
	// nothing does not tie the next one to a process that stamped a sync.
	connStamped bool
}

// NewNode is a node not asked yet. Without an address it is unverified:
// nothing can be asked.
func NewNode(name, addr string) *Node {
	n := &Node{Name: name, Addr: addr, stalledFrom: noInstant}
	if addr == "" {
		n.problem = &PollError{Msg: "node has no InternalIP to reach kube-proxy at"}
	}
	return n
}

// Failed records a poll sent at sent that failed with e, seen at now. It
// says whether the failure differs from the one before (for the log).
func (n *Node) Failed(e *PollError, sent, now time.Time) (changed bool) {
	changed = n.problem == nil || n.problem.Msg != e.Msg
	n.problem, n.failed = e, true
	if !e.Pending {
		// It answered and told nothing (or could not be reached): the
		// next stamp, even on this connection, is not tied to a sync.
		// A poll that timed out leaves the connection waiting for the
		// same process's answer.
		n.connStamped = false
	}
	if e.Pending { // accepted, never answered: kube-proxy is not running
		n.stalled(sent, now, true)
		if n.stalledFrom == noInstant {
			n.stalledFrom = instantOf(sent)
		}
	}
	return changed
}

// Reconnected records that the next answer comes on a new connection
// because the node closed the one that answered before: kube-proxy's
// server does not close idle connections, so the process that answered on
// it may be gone, and a new lastUpdated a restarted instance's start stamp.
func (n *Node) Reconnected() { n.failed, n.connStamped = true, false }

// AwaitsStamp says the node's next stamp may be a restarted kube-proxy's
// start rather than a sync: it answered with per-family stamps before,
// then its last poll was refused or told nothing (a kube-proxy starting
// answers without per-family status, as one older than 1.33 does), or the
// connection that answered closed, and no stamped answer came since. Not
// after a poll that timed out (its connection waits for the same
// process's answer), nor where an emulation answers (it never stamps a
// sync).
func (n *Node) AwaitsStamp() bool {
	if !n.answered || n.connStamped {
		return false
	}
	return n.problem == nil || (!n.problem.Pending && (n.problem.Proxy == ProxyUnknown || n.problem.Proxy == ProxyKubeProxyOld))
}

// Answered says whether healthz answered at least once: a connection to
// the node has carried an answer, so a later lastUpdated on it is a sync
// (Record's sameProcess).
func (n *Node) Answered() bool { return n.answered }

// Silent is how long kube-proxy provably ran after its last sync of fam
// without running another (see syncFacts.silent); 0 when unknown.
func (n *Node) Silent(fam discovery.AddressType) time.Duration {
	if f := n.sync(fam); f != nil {
		return f.silent
	}
	return 0
}

// sync is what is known of fam's last sync; nil when nothing is.
func (n *Node) sync(fam discovery.AddressType) *syncFacts {
	for i := range n.syncs {
		if n.syncs[i].family() == fam {
			return &n.syncs[i]
		}
	}
	return nil
}

// stalled records a stall from the sending of a request to now; timedOut:
// the request was not answered within its timeout.
func (n *Node) stalled(from, to time.Time, timedOut bool) {
	n.stalls = append(n.stalls, stall{from: from, to: to, timedOut: timedOut})
	if len(n.stalls) > maxStalls {
		// Merging the two oldest widens the interval: never less cautious
		// (a timed-out one only if both were: Node.slowestSync).
		a, b := n.stalls[0], n.stalls[1]
		n.stalls = append([]stall{{from: minTime(a.from, b.from), to: maxTime(a.to, b.to), timedOut: a.timedOut && b.timedOut}}, n.stalls[2:]...)
	}
}

// reference gives the receipt time against which a sync's lateness is
// judged: r, or, after a stall that began before the sync can have
// completed, the stall's end plus the time the resumed kube-proxy may take
// to catch up: the stall's length, at most catchUp (its minSyncPeriod). A
// kube-proxy that resumes has the stall's watch events to process, and
// each one it processes may start a sync before the next is read:
// minSyncPeriod has passed during the stall, so a sync runs at once
// without what is still in the backlog, and the next one only a
// minSyncPeriod after it ends (pkg/proxy/runner): the sync that holds a
// change delivered late in the backlog can come a minSyncPeriod after the
// resume. Measured: a node frozen 4 s synced within 0.35 s of its resume
// without the change, and dropped the pod 1.38 s after it. A sync
// confirms by lateness only after late (+ D); one before r (− Lag) is no
// sync since the change; one between is ambiguous, and so is one that
// completed in the stall: it shows kube-proxy ran, the stall being a
// network that dropped our polls or a freeze that ended before it (it
// may then be a catch-up sync without the change). Silence proves an
// ambiguous sync only from D past the catch-up (Node.resumed).
func (n *Node) reference(f *syncFacts, r time.Time, catchUp time.Duration) (late time.Time) {
	late = r
	for _, s := range n.stalls {
		if !f.latestAt().After(s.from) {
			continue
		}
		late = maxTime(late, s.caughtUp(catchUp))
	}
	return late
}

// resumed is when kube-proxy has the change we received at r, if it runs:
// r, or after any stall that ended after r − Lag, however it lies to the
// sync judged, the stall's end plus its catch-up (reference). What proves
// a sync by kube-proxy having had the change — silence after it, a
// pending gauge at zero — counts only from then: a sync that completed
// before a freeze holds what it held, but the quick answers right after
// the resume, their ages spanning the freeze, and a zero read then, come
// before the resumed informer delivers the change.
func (n *Node) resumed(r time.Time, lag, catchUp time.Duration) time.Time {
	at := r
	for _, s := range n.stalls {
		if s.to.After(r.Add(-lag)) {
			at = maxTime(at, s.caughtUp(catchUp))
		}
	}
	if n.stalledFrom != noInstant {
		// Not answered since a poll timed out: it has not resumed yet.
		at = maxTime(at, farFuture)
	}
	return at
}

// since is what a sync f of n (nil: none seen yet) is judged from for a
// change we received at r: late (Node.reference) and resumed (the later
// of late and Node.resumed), the instant from which kube-proxy has the
// change if it runs. Rule.node judges by them and Rule.FirstProof
// schedules by them, so the two cannot drift apart.
func (ru Rule) since(n *Node, f *syncFacts, r time.Time) (late, resumed time.Time) {
	late = r
	if f != nil {
		late = n.reference(f, r, ru.MinSync)
	}
	return late, maxTime(late, n.resumed(r, ru.Lag, ru.MinSync))
}

// farFuture stands for an instant not reached yet.
var farFuture = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)

// stepTolerance is how far two polls of one sync may disagree on its
// completion before the node's clock counts as stepped: more than clock
// slewing (at most 500 ppm) moves it within a drain, less than NTP's step
// threshold (128 ms). A smaller disagreement widens the bounds instead.
const stepTolerance = 50 * time.Millisecond

// Record keeps a healthz answer obtained between sent and received; settle
// is the rule's D (see syncFacts.silent). sameProcess: it came over a
// connection that had carried an answer before (even if a poll failed since),
// so no restart came in between and a new lastUpdated is a sync; without it,
// a new lastUpdated may be a start stamp (syncFacts.startStamp, firstAnswer).
func (n *Node) Record(h Healthz, sent, received time.Time, settle time.Duration, sameProcess bool) {
	if h.Proxy.NoSync() {
		// An emulated healthz (Cilium, OVN-Kubernetes): its lastUpdated is
		// no sync, so it is a poll that told nothing, and whatever answers
		// after it is another process.
		n.Failed(&PollError{Msg: "healthz at " + n.Addr + " answers as " + h.Proxy.String() + ": " + h.Proxy.Why(), Proxy: h.Proxy}, sent, received)
		return
	}
	sameProcess = sameProcess && n.connStamped
	failed := n.failed && !sameProcess
	n.answered, n.problem, n.failed = true, nil, false
	n.healthzAhead = h.CurrentTime.Sub(sent)
	n.connStamped = len(h.Families) > 0
	if !sameProcess || n.connFirst == 0 {
		n.connFirst = h.CurrentTime.UnixNano()
	}
	switch {
	case n.stalledFrom != noInstant:
		// The first answer after an unanswered poll: a request sent just
		// before kube-proxy resumed comes back quick, yet its watch and
		// sync loop have only just resumed too.
		n.stalled(n.stalledFrom.time(), received, true)
		n.stalledFrom = noInstant
	case received.Sub(sent) > quickAnswer:
		n.stalled(sent, received, false)
	}
	kept := n.syncs[:0]
	for _, f := range n.syncs {
		if _, ok := h.Families[f.family()]; ok {
			kept = append(kept, f)
		}
	}
	clear(n.syncs[len(kept):])
	n.syncs = kept
	for fam, fh := range h.Families {
		age := h.CurrentTime.Sub(fh.LastUpdated)
		lo, hi := sent.Add(-age), received.Add(-age)
		f := n.sync(fam)
		if f == nil || f.lastUpdated != fh.LastUpdated.UnixNano() {
			// A new sync, or after a failed poll possibly a new
			// kube-proxy's start stamp.
			if f == nil {
				n.syncs = append(n.syncs, syncFacts{})
				f = &n.syncs[len(n.syncs)-1]
			}
			*f = syncFacts{v6: fam == discovery.AddressTypeIPv6, lastUpdated: fh.LastUpdated.UnixNano(), earliest: instantOf(lo), latest: instantOf(hi),
				lastQuick: noInstant, age: age, healthy: fh.Healthy, startStamp: failed, firstAnswer: !sameProcess, recent: f.recent[:0]}
			f.metricsSync = n.metrics.synced(fam, fh.LastUpdated, n.firstOnConn())
			f.noteQuick(age, sent, received, settle)
			continue
		}
		if f.stepped {
			continue // nothing this sync says is trusted any more
		}
		earliest, latest := f.earliestAt(), f.latestAt()
		if lo.Sub(latest) > stepTolerance || earliest.Sub(hi) > stepTolerance {
			// Polls of one sync that place it far apart: the node's clock
			// was stepped between them, and a backward step makes an old
			// sync look recent. Neither poll is trusted; a newer sync,
			// stamped and aged in the stepped clock, is.
			f.stepped = true
			continue
		}
		f.noteQuick(age, sent, received, settle)
		if lo.After(latest) || hi.Before(earliest) {
			// A small disagreement (clock slewing): take both intervals.
			earliest, latest = minTime(earliest, lo), maxTime(latest, hi)
		} else {
			earliest, latest = maxTime(earliest, lo), minTime(latest, hi)
		}
		f.earliest, f.latest = instantOf(earliest), instantOf(latest)
		f.age = max(f.age, age)
		f.healthy = fh.Healthy
	}
}

// noteQuick takes an answer's age into silent, and its sending into
// lastQuick, when it came back within quickAnswer.
func (f *syncFacts) noteQuick(age time.Duration, sent, received time.Time, settle time.Duration) {
	if received.Sub(sent) > quickAnswer {
		return
	}
	f.lastQuick = instantOf(maxTime(f.lastQuick.time(), sent))
	keep := f.recent[:0]
	for _, a := range f.recent {
		if a+settle <= age {
			f.silent = max(f.silent, a) // a quick answer followed it by settle
		} else {
			keep = append(keep, a)
		}
	}
	if len(keep) == maxRecent {
		keep = keep[1:]
	}
	f.recent = append(keep, age)
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// instant is an instant of our clock in 8 bytes where a time.Time takes
// 24, kept per node for thousands of nodes: its offset from epoch, the
// first time stored (the judgement reads no clock: it is handed its
// times), so that the instant read back (time) keeps a monotonic reading
// where the times handed in have one (epoch.Add keeps epoch's) and
// compares as they did. noInstant stands for the zero time.
type instant int64

const noInstant instant = math.MinInt64

var (
	epoch     time.Time
	epochOnce sync.Once
)

func instantOf(t time.Time) instant {
	if t.IsZero() {
		return noInstant
	}
	epochOnce.Do(func() { epoch = t })
	return instant(t.Sub(epoch))
}

func (i instant) time() time.Time {
	if i == noInstant {
		return time.Time{}
	}
	return epoch.Add(time.Duration(i))
}

// earliestAt and latestAt are the bounds of the sync's completion (earliest,
// latest) as times.
func (f *syncFacts) earliestAt() time.Time { return f.earliest.time() }
func (f *syncFacts) latestAt() time.Time   { return f.latest.time() }

// Rule is the confirmation rule's three durations, explained with the
// measurements behind their defaults in the package comment.
type Rule struct {
	MinSync   time.Duration // kube-proxy's minSyncPeriod, assumed
	Allowance time.Duration // D: kube-proxy's lag behind us + one sync
	Lag       time.Duration // how much earlier than us kube-proxy may get a change
}

// judge says whether a sync provably holds a change we received at r; late
// is Node.reference, resumed Node.resumed; measured is Node.measured, own
// Node.ownTook.
func (ru Rule) judge(f *syncFacts, r, late, resumed time.Time, measured bool, own time.Duration) (NodeVerdict, string) {
	lateBy := ru.lateBy(own)
	earliest := f.earliestAt()
	switch {
	case !f.healthy:
		return NodePending, "kube-proxy reports a change unsynced for longer than its healthz timeout"
	case f.startStamp && !f.metricsSync:
		// kube-proxy stamps lastUpdated when its sync loop starts, before
		// its first sync; the rules of the instance before it still pick
		// the pod. Only a later lastUpdated is a sync.
		return NodePending, "healthz failed before this lastUpdated: it may be a restarted kube-proxy's start, not a sync; waiting for a later one"
	case f.stepped:
		return NodePending, "the node's clock was stepped since the last sync: its age is not trusted; waiting for a newer sync"
	case f.firstAnswer && !f.metricsSync && !earliest.Before(late.Add(lateBy)):
		// Late enough to confirm, but first seen on a new connection: a
		// kube-proxy restarted after the change and before that connection
		// stamped it at start, and the old instance's rules may still pick
		// the pod. An earlier stamp would have been judged as a sync (it
		// cannot confirm by lateness); only a later one on this connection,
		// from the same process, is a sync.
		return NodePending, "lastUpdated first seen on a new connection, after the change: it may be a kube-proxy restarted since, stamping its start, not a sync; waiting for a later one"
	case !earliest.Before(late.Add(lateBy)) && !measured:
		return NodePending, "a sync completed late enough; waiting for kube-proxy's metrics to say how long it took"
	case !earliest.Before(late.Add(lateBy)):
		// Completed at least D after our receipt (after a stall, after the
		// catch-up): it started after kube-proxy had the change, so it
		// holds it. (Rule.For has raised D to the syncs the metrics
		// measured; lateBy to this sync's own duration, where they
		// measured it.)
		return NodeConfirmed, ""
	case earliest.Before(r.Add(-ru.Lag)):
		// Completed before kube-proxy can have had the change: the sync
		// that holds it has not happened. A partitioned kube-proxy stays
		// here, healthy, for as long as the partition lasts.
		return NodePending, fmt.Sprintf("no sync since the change (last sync %v before it)", r.Sub(earliest).Round(time.Millisecond))
	case f.silent >= ru.silence(f, resumed):
		// Ambiguous, but had it missed the change, kube-proxy would have
		// run the next sync within minSyncPeriod of its end and finished it
		// within D; it provably ran that long (two quick answers, see
		// silence) and none came.
		return NodeConfirmed, ""
	}
	return NodePending, fmt.Sprintf("last sync may predate the change; waiting for kube-proxy to run %v past it without a newer one (%v so far)",
		ru.silence(f, resumed).Round(time.Millisecond), f.silent.Round(time.Millisecond))
}

// silence is how long kube-proxy must provably run after an ambiguous sync
// without a newer one: MinSync + D, and until D past resumed (Node.resumed):
// the first of the two quick answers (silent is its age) must be read when
// kube-proxy has the change; its age from the sync's earliest completion
// bounds when it was read. Without a stall since r − Lag that adds nothing
// (the sync completed after r − Lag).
func (ru Rule) silence(f *syncFacts, resumed time.Time) time.Duration {
	return max(ru.MinSync+ru.Allowance, resumed.Add(ru.Allowance).Sub(f.earliestAt()))
}

// lateBy is how long after late (Node.reference) a sync must have
// completed to confirm by lateness: D, and at least the watch's skew plus
// the sync's own duration (own: Node.ownTook, 0 when not measured), which
// bounds its start: a sync stretched by a freeze that slowestSync leaves
// out of D still started that long before it completed.
func (ru Rule) lateBy(own time.Duration) time.Duration {
	if own <= 0 {
		return ru.Allowance
	}
	return max(ru.Allowance, max(ru.Lag, 0)+own)
}

// ambiguous says whether judge leaves f to the silence rule: a trusted
// sync that completed between the earliest instant kube-proxy can have had
// the change (r − Lag, r our receipt) and lateBy after late (reference).
func (ru Rule) ambiguous(f *syncFacts, r, late time.Time, own time.Duration) bool {
	switch {
	case !f.healthy, f.stepped, f.startStamp && !f.metricsSync:
		return false
	case f.earliestAt().Before(r.Add(-ru.Lag)):
		return false // no sync since the change
	}
	return f.earliestAt().Before(late.Add(ru.lateBy(own)))
}

// Node is a node's verdict for the changes each family must hold
// (targets: family → receipt of its change). A failed poll does not erase
// what earlier answers showed: the worse of the two stands.
func (ru Rule) Node(n *Node, targets map[discovery.AddressType]time.Time) (NodeVerdict, string) {
	j := ru.node(n, targets)
	return j.verdict, j.why
}

// Witness names what confirmed the node: WitnessHealthz when healthz
// alone proves every family's sync, WitnessMetrics when kube-proxy's
// metrics were needed for one of them; empty when it is not confirmed.
func (ru Rule) Witness(n *Node, targets map[discovery.AddressType]time.Time) string {
	return ru.node(n, targets).witness
}

// SyncedBy dates a confirmed node's confirmation: the latest instant, in
// our clock, at which the syncs that hold every family's change can have
// completed (the upper bound of each sync's completion, received − age).
// From then on its kube-proxy sends no new connection here. False when the
// node is not confirmed, or when the metrics' pending gauge confirmed a
// family (pendingSynced, pendingQuiet), which proves the change synced
// without dating the sync.
func (ru Rule) SyncedBy(n *Node, targets map[discovery.AddressType]time.Time) (time.Time, bool) {
	j := ru.node(n, targets)
	return j.syncedBy, j.verdict == NodeConfirmed && !j.syncedBy.IsZero()
}

// judgement is a node's verdict with the witness that confirmed it and
// when its syncs completed (SyncedBy); both empty unless confirmed.
type judgement struct {
	verdict  NodeVerdict
	why      string
	witness  string
	syncedBy time.Time
}

// node is Node with the witness that confirmed it and its date.
func (ru Rule) node(n *Node, targets map[discovery.AddressType]time.Time) judgement {
	if !n.answered && n.problem != nil {
		return judgement{verdict: n.problem.verdict(), why: n.problem.Msg}
	}
	ru = ru.For(n)
	worst, why, witness := NodeConfirmed, "", WitnessHealthz
	var syncedBy time.Time
	undated := false
	for fam, r := range targets {
		v, w, ofFam := NodePending, "healthz not read yet", false
		if f := n.sync(fam); f != nil {
			late, resumed := ru.since(n, f, r)
			own := n.ownTook(f)
			v, w = ru.judge(f, r, late, resumed, n.measured(f), own)
			switch {
			case v == NodeConfirmed && f.metricsSync && (f.startStamp || f.firstAnswer):
				witness = WitnessMetrics // healthz alone would have waited
			case v == NodePending && ru.pendingSynced(n, f, fam, resumed):
				v, witness, undated = NodeConfirmed, WitnessMetrics, true
			case v == NodePending && ru.ambiguous(f, r, late, own) && ru.queuedHeld(n, f, resumed):
				v, witness = NodeConfirmed, WitnessMetrics
			case v == NodePending && ru.ambiguous(f, r, late, own) && ru.pendingQuiet(n, f, r, resumed):
				v, witness, undated = NodeConfirmed, WitnessMetrics, true
			}
			if v == NodeConfirmed {
				// The sync judged holds the change; it completed by latest.
				syncedBy = maxTime(syncedBy, f.latestAt())
			}
			ofFam = true
		} else if n.answered {
			v, w = NodeUnverified, fmt.Sprintf("healthz has no %s status", fam)
		}
		if v > worst {
			if ofFam {
				w = string(fam) + ": " + w // only when it is shown: most nodes confirm
			}
			worst, why = v, w
		}
	}
	if worst != NodeConfirmed && n.problem != nil {
		if n.problem.verdict() >= worst {
			return judgement{verdict: n.problem.verdict(), why: n.problem.Msg}
		}
		// An earlier answer decides, but the operator should see that the
		// node stopped answering (a kube-proxy gone, not merely slow).
		why += "; last poll failed: " + n.problem.Msg
	}
	if worst != NodeConfirmed {
		return judgement{verdict: worst, why: why}
	}
	if undated {
		syncedBy = time.Time{}
	}
	return judgement{verdict: worst, why: why, witness: witness, syncedBy: syncedBy}
}

// Healthz is what the confirmation reads of kube-proxy's /healthz answer:
//
//	{"lastUpdated":…,"currentTime":…,"nodeEligible":true,"healthy":true,
//	 "status":{"IPv4":{"lastUpdated":…,"healthy":true}}}
//
// The top-level lastUpdated is ignored: kube-proxy sets it to the current
// time whenever it is healthy. Per family, lastUpdated is the completion of
// the last successful rule sync (kube-proxy ≥ 1.33), in the node's clock.
type Healthz struct {
	CurrentTime time.Time // node clock
	Families    map[discovery.AddressType]FamilyHealth
	Proxy       Proxy // what answered; Record refuses the stamps of one whose lastUpdated is no sync
}

// FamilyHealth is one family's status in a healthz answer.
type FamilyHealth struct {
	LastUpdated time.Time // node clock
	Healthy     bool      // false: a change has waited longer than kube-proxy's healthz timeout
}

// PollError is why a node's healthz could not be read, and whether that
// leaves the node pending (it accepted and did not answer: kube-proxy may be
// frozen with stale rules) or unverified (nothing there speaks healthz).
type PollError struct {
	Pending bool
	Msg     string
	Proxy   Proxy // what answered, when an answer came and named it
}

func (e *PollError) Error() string { return e.Msg }

func (e *PollError) verdict() NodeVerdict {
	if e.Pending {
		return NodePending
	}
	return NodeUnverified
}
