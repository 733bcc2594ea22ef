package judge

import (
	"math"
	"time"

	discovery "k8s.io/api/discovery/v1"
)

// The witnesses that can confirm a node (Rule.Witness).
const (
	WitnessHealthz = "healthz" // healthz alone proved the sync
	WitnessMetrics = "metrics" // kube-proxy's metrics were needed
)

// Metrics is what the confirmation reads of kube-proxy's /metrics (its
// --metrics-bind-address, pkg/proxy/metrics in kube-proxy 1.37):
//
//   - kubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family}: set to
//     the node's time right after healthz's per-family stamp, at the end
//     of a successful sync only (never at the sync loop's start, unlike
//     healthz's lastUpdated);
//   - kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds{ip_family}:
//     set to the node's time when a change reaches the proxier of its
//     family (Proxier.Sync, after the change is recorded for the next sync
//     to take; the sync loop's start sets it too), before the sync runner
//     is asked to run; never lowered;
//   - process_start_time_seconds: the process that answers;
//   - kubeproxy_sync_proxy_rules_endpoint_changes_pending: raised when
//     kube-proxy receives an EndpointSlice change, set to 0 when a sync
//     takes the pending changes, at its start (endpointschangetracker.go
//     checkoutChanges), not when its rules are written.
//   - kubeproxy_sync_proxy_rules_duration_seconds{ip_family}, its _count
//     and _sum: every sync's duration, observed when the sync returns, a
//     moment after it stamps its completion (the deferred Observe in
//     syncProxyRules; the duration runs from before the sync takes the
//     pending changes). Between two answers of one process, one more sync
//     counted is measured exactly by the sum's growth; several are each
//     bounded by it.
//
// Times are the node's clock.
type Metrics struct {
	ProcessStart time.Time                           // zero: not in the answer
	Synced       map[discovery.AddressType]time.Time // last successful sync per family
	Queued       map[discovery.AddressType]time.Time // last change queued per family
	Pending      int
	HasPending   bool // the pending gauge was in the answer
	// Durations is the sync-duration histogram's count and sum per family;
	// a family missing from it is not measured.
	Durations map[discovery.AddressType]SyncDurations
}

// SyncDurations is kubeproxy_sync_proxy_rules_duration_seconds's _count
// and _sum for one family: the syncs run since the process started, and
// their total duration in seconds.
type SyncDurations struct {
	Count uint64
	Sum   float64
}

// sameSync bounds how far after healthz's per-family stamp the metrics'
// stamp of the same sync is: kube-proxy sets the two one after the other
// (iptables/proxier.go: healthzServer.Updated, then SetToCurrentTime),
// microseconds apart, in one clock; a sync takes far longer than this.
// A metrics stamp this close after a healthz lastUpdated of its family
// ties the metrics to the process that answers healthz.
const sameSync = 10 * time.Millisecond

// startSlack is the resolution of process_start_time_seconds (/proc's
// start time in clock ticks from a boot time in whole seconds): two starts
// closer than this are one process.
const startSlack = time.Second

// maxMetricsStamps bounds the sync stamps kept per family, and
// maxZeroReads the answers with no pending change kept.
const (
	maxMetricsStamps = 8
	maxZeroReads     = 8
)

// metricsFacts is what kube-proxy's metrics said, for one process. A
// node keeps it for the length of a drain, thousands of nodes at once:
// slices of a family or two, not maps (a map per family and per answer
// made it 2 KB a node after three answers).
type metricsFacts struct {
	start time.Time       // process_start_time_seconds; zero until read
	fams  []metricsFamily // the families with a successful sync seen
	zeros []zeroRead      // answers with 0 pending changes, oldest first
	// seq counts the stamps taken, every family: a stamp and an answer
	// with no pending change are ordered by it.
	seq uint64
	// off: the metrics are not read again (MetricsOff); no sync waits for
	// them to measure it.
	off bool
}

// metricsFamily is the successful syncs seen of one family, oldest first:
// stamps only rise, so the last is the newest; and the duration
// histogram's count and sum at the last answer that had them (counted).
//
// heldSeq and heldSent: the latest quick answer, sent at heldSent, whose
// newest sync of the family (the stamp numbered heldSeq) started after the
// last change kube-proxy had queued for it (Rule.queuedHeld).
type metricsFamily struct {
	fam      discovery.AddressType
	stamps   []metricsStamp
	count    uint64
	sum      float64
	counted  bool
	heldSeq  uint64
	heldSent instant
}

// metricsStamp is one sync stamp read, taken when metricsFacts.seq became
// seq. tied: a healthz lastUpdated of its family, from the process the
// metrics came from, matched it (sameSync): only a tied stamp, and an
// answer that carried one, count (any listener on the node's metrics
// port can serve a start time older than healthz's connection; only
// kube-proxy serves healthz's stamps).
//
// took bounds how long the sync took (the sum's growth over the syncs
// counted since the answer before): tookUnknown until an answer counts
// it, tookUnmeasured when no answer can (it was counted before the first
// answer with the histogram, or the answer had none).
type metricsStamp struct {
	at   time.Time
	seq  uint64
	took time.Duration
	tied bool
}

// The two values of metricsStamp.took that are no duration.
const (
	tookUnknown    time.Duration = 0
	tookUnmeasured time.Duration = -1
)

// zeroRead is an answer that had no pending change: sent at our clock,
// taken when seq stamps had been, carrying the stamps numbered carried
// (0: none). A stamp of a family with a larger seq is a successful sync
// newer than the one the answer carried, or the first.
type zeroRead struct {
	sent, received time.Time
	seq            uint64
	carried        [2]uint64
}

// family is fam's syncs seen; nil when none.
func (mf *metricsFacts) family(fam discovery.AddressType) *metricsFamily {
	for i := range mf.fams {
		if mf.fams[i].fam == fam {
			return &mf.fams[i]
		}
	}
	return nil
}

// newest is fam's newest stamp; nil when none.
func (mf *metricsFacts) newest(fam discovery.AddressType) *metricsStamp {
	if f := mf.family(fam); f != nil && len(f.stamps) > 0 {
		return &f.stamps[len(f.stamps)-1]
	}
	return nil
}

// ensure is fam's syncs seen, added when none are.
func (mf *metricsFacts) ensure(fam discovery.AddressType) *metricsFamily {
	if f := mf.family(fam); f != nil {
		return f
	}
	mf.fams = append(mf.fams, metricsFamily{fam: fam})
	return &mf.fams[len(mf.fams)-1]
}

// measure takes an answer's duration histogram of f's family (ok: the
// answer had it) and returns what it says of the syncs counted since the
// answer before: the sum's growth, which bounds each of them (exact for
// one); tookUnknown when none was counted since; tookUnmeasured when there
// is no answer before to count from, or no histogram.
func (f *metricsFamily) measure(d SyncDurations, ok bool) time.Duration {
	if !ok {
		f.counted = false
		return tookUnmeasured
	}
	took := tookUnmeasured
	if f.counted && d.Count >= f.count && d.Sum >= f.sum {
		took = tookUnknown
		if d.Count > f.count {
			// Rounded up, at least a nanosecond: the sum is a float of seconds.
			took = time.Duration(math.Ceil((d.Sum-f.sum)*float64(time.Second))) + time.Microsecond
		}
	}
	f.count, f.sum, f.counted = d.Count, d.Sum, true
	return took
}

// take keeps a successful sync of fam stamped t, when it is newer than
// the newest kept (the caller has reset the facts for an older one), with
// took, what the answer's histogram said of the syncs counted since the
// answer before (measure), and returns the seq of the stamp that holds t.
// When t is the newest kept and its duration is still unknown (the answer
// before showed the stamp before the sync counted itself), took is its.
func (mf *metricsFacts) take(fam discovery.AddressType, t time.Time, took time.Duration) uint64 {
	f := mf.ensure(fam)
	if len(f.stamps) > 0 && !t.After(f.stamps[len(f.stamps)-1].at) {
		s := &f.stamps[len(f.stamps)-1]
		if s.took == tookUnknown && took != tookUnknown && t.Equal(s.at) {
			s.took = took
		}
		return s.seq
	}
	mf.seq++
	f.stamps = appendBounded(f.stamps, metricsStamp{at: t, seq: mf.seq, took: took}, maxMetricsStamps)
	return mf.seq
}

// noteHeld notes an answer sent at sent and in by received whose newest
// sync of fam, the stamp numbered seq, started after queued, the last
// change kube-proxy had queued for fam when it served the answer: that
// sync took every change queued by then (Rule.queuedHeld). The start is
// the stamp less the sync's own measured duration, which runs from before
// the sync takes the pending changes to after it stamps its end: never
// later than the true start. Only a quick answer counts: one held by a
// frozen kube-proxy was served before its informer could deliver what
// came meanwhile.
func (mf *metricsFacts) noteHeld(fam discovery.AddressType, seq uint64, queued, sent, received time.Time) {
	s := mf.stamp(seq)
	if s == nil || s.took <= 0 || queued.IsZero() || received.Sub(sent) > quickAnswer {
		return
	}
	if queued.Before(s.at.Add(-s.took)) {
		f := mf.family(fam)
		f.heldSeq, f.heldSent = seq, instantOf(sent)
	}
}

// stamp is the kept stamp numbered seq; nil when none is (dropped, or 0).
func (mf *metricsFacts) stamp(seq uint64) *metricsStamp {
	if seq == 0 {
		return nil
	}
	for i := range mf.fams {
		for j := range mf.fams[i].stamps {
			if s := &mf.fams[i].stamps[j]; s.seq == seq {
				return s
			}
		}
	}
	return nil
}

// tied says whether any stamp kept is tied: the metrics come from the
// process that stamped healthz.
func (mf *metricsFacts) tied() bool {
	for i := range mf.fams {
		for _, s := range mf.fams[i].stamps {
			if s.tied {
				return true
			}
		}
	}
	return false
}

// zeroTied says whether the answer z carried a tied stamp.
func (mf *metricsFacts) zeroTied(z zeroRead) bool {
	for _, seq := range z.carried {
		if s := mf.stamp(seq); s != nil && s.tied {
			return true
		}
	}
	return false
}

// appendBounded appends v to s, first dropping the oldest when s holds
// max: its array is reused, not grown.
func appendBounded[T any](s []T, v T, max int) []T {
	if len(s) >= max {
		n := copy(s, s[len(s)-max+1:])
		s = s[:n]
	}
	return append(s, v)
}

// MetricsNote is what RecordMetrics made of an answer, for the log.
type MetricsNote int

// The notes.
const (
	MetricsTaken     MetricsNote = iota // kept
	MetricsRestarted                    // kept; a new process start after a tied one: a restart
	MetricsReset                        // kept, after dropping what the metrics said before: a stamp went backwards
	MetricsRefused                      // not kept: no process start, no healthz answer before it, or a stamp later than that answer allows
)

// RecordMetrics keeps a metrics answer whose request was sent at sent and
// whose answer was in by received (our clock), read after the node's last
// healthz answer (Record). What it says counts only when tied to healthz:
// a stamp matching a healthz lastUpdated of its family (sameSync), the
// answer's or a later one's.
//
// Refused whole: an answer without a process start, or with a stamp later
// than the last healthz answer's currentTime plus the time from that
// request's sending to this answer's receipt (the node's clock runs as
// ours) plus stepTolerance. kube-proxy stamps a sync with the time it
// ends; a later stamp is no sync of it, and taken it would stand as the
// newest for the process's life.
//
// A stamp older than the newest kept of its family (the node's clock
// stepped back, or a restart its start time does not show) drops what the
// metrics said before and is kept. A process start other than the one
// read before drops what the old process's metrics said. It marks no
// healthz stamp: healthz's own rules see a restart (the failed poll, the
// closed connection, the first answer on a new one), and marking by the
// metrics' start, read late, held syncs that healthz alone confirmed.
func (n *Node) RecordMetrics(m Metrics, sent, received time.Time) MetricsNote {
	if m.ProcessStart.IsZero() || !n.answered {
		return MetricsRefused
	}
	bound := received.Add(n.healthzAhead + stepTolerance)
	for _, t := range m.Synced {
		if t.After(bound) {
			return MetricsRefused
		}
	}
	note := MetricsTaken
	if n.metrics == nil {
		n.metrics = &metricsFacts{}
	}
	mf := n.metrics
	if !mf.start.IsZero() && absDuration(m.ProcessStart.Sub(mf.start)) >= startSlack {
		// Another process: kube-proxy restarted (its healthz shows it as a
		// failed poll, a closed connection or a first answer on a new
		// one), or another listener answers.
		if mf.tied() {
			note = MetricsRestarted
		}
		*mf = metricsFacts{}
	}
	for fam, t := range m.Synced {
		if s := mf.newest(fam); s != nil && !t.IsZero() && t.Before(s.at) {
			*mf = metricsFacts{}
			if note == MetricsTaken {
				note = MetricsReset
			}
			break
		}
	}
	mf.start = m.ProcessStart
	for fam, d := range m.Durations {
		if _, ok := m.Synced[fam]; !ok {
			mf.ensure(fam).measure(d, true) // no sync stamped yet: counted for the next answer
		}
	}
	var carried [2]uint64
	i := 0
	for fam, t := range m.Synced {
		d, ok := m.Durations[fam]
		took := mf.ensure(fam).measure(d, ok)
		if !t.IsZero() && i < len(carried) {
			carried[i] = mf.take(fam, t, took)
			mf.noteHeld(fam, carried[i], m.Queued[fam], sent, received)
			i++
		}
	}
	if m.HasPending && m.Pending == 0 {
		mf.zeros = appendBounded(mf.zeros, zeroRead{sent: sent, received: received, seq: mf.seq, carried: carried}, maxZeroReads)
	}
	for i := range n.syncs {
		if f := &n.syncs[i]; !f.metricsSync {
			f.metricsSync = mf.synced(f.family(), f.updated(), n.firstOnConn())
		}
	}
	return note
}

// sameProcess says whether the metrics came from the process that
// answers healthz: one started before that connection's first answer.
// A process started after it is another kube-proxy, whose metrics say
// nothing of the answers on that connection.
func (n *Node) sameProcess() bool {
	return n.metrics != nil && !n.metrics.start.IsZero() && n.connFirst != 0 && !n.metrics.start.After(n.firstOnConn().Add(startSlack))
}

// synced says whether a healthz lastUpdated of fam is a successful sync
// in the metrics of the process that answered healthz first at connFirst:
// a metrics stamp at most sameSync after it, which it then ties.
func (mf *metricsFacts) synced(fam discovery.AddressType, lastUpdated, connFirst time.Time) bool {
	if mf == nil || mf.start.IsZero() || connFirst.IsZero() || mf.start.After(connFirst.Add(startSlack)) {
		return false
	}
	if f := mf.family(fam); f != nil {
		for i := range f.stamps {
			if d := f.stamps[i].at.Sub(lastUpdated); d >= 0 && d <= sameSync {
				f.stamps[i].tied = true
				return true
			}
		}
	}
	return false
}

// pendingSynced is the pending-changes rule: a tied answer of the
// process that answers healthz had no pending change, sent at least D
// after our receipt r (kube-proxy had the change by then, D being its lag
// behind us plus a sync), and a tied stamp of fam is newer than the one it
// carried. The 0 says a sync took the change; it is set when the sync
// starts, so only a sync completed after it proves the rules hold it. A
// sync that completed before that answer proves nothing here: the
// healthz rules judge it.
func (ru Rule) pendingSynced(n *Node, f *syncFacts, fam discovery.AddressType, r time.Time) bool {
	if !f.healthy || !n.sameProcess() {
		return false
	}
	mf := n.metrics // not nil: sameProcess
	fm := mf.family(fam)
	if fm == nil {
		return false
	}
	for _, z := range mf.zeros {
		if z.sent.Before(r.Add(ru.Allowance)) || !mf.zeroTied(z) {
			continue
		}
		for _, s := range fm.stamps {
			if s.tied && s.seq > z.seq { // newer than the answer's, or its first
				return true
			}
		}
	}
	return false
}

// pendingQuiet is the silence rule sped up by the pending gauge, for an
// ambiguous sync S (Rule.ambiguous: it may predate the change) of a
// kube-proxy that runs one family. A tied answer of the process that
// answers healthz, carrying S, had no pending change, sent at least D after from (our receipt
// r, or after a stall its catch-up: Node.resumed), when S was its newest
// successful sync; and a quick healthz answer sent at least D after that
// answer was in still showed S, with no stall of the node since the zero
// was sent. kube-proxy had the change by the zero (D
// is its lag behind us plus a sync), so a sync had taken it by then
// (checkoutChanges zeroes the gauge at a sync's start): S, or one
// running at the zero, which would have completed within D and shown a
// newer lastUpdated. So S holds the change. It shares the silence rule's
// assumptions (the change reaches kube-proxy within D; a sync that fails
// shows no stamp) and replaces its MinSync + D of silence by D after the
// first zero read at R + D. With two families the gauge is one for both
// proxiers, and the other's sync zeroes it while this one's change waits:
// so the other family's newest sync must have completed before kube-proxy
// can have had the change (r − Lag, whatever stall came since) and still
// be its newest in the same quick answer D after the zero. A sync of it that started before the
// zero would have shown by then; none started, so the zero is this
// family's.
func (ru Rule) pendingQuiet(n *Node, f *syncFacts, r, from time.Time) bool {
	if !f.healthy || !f.metricsSync || !n.sameProcess() {
		return false
	}
	mf := n.metrics // not nil: sameProcess
	s := mf.newest(f.family())
	// S must be the newest sync the metrics hold, tied to healthz.
	if s == nil || !s.tied {
		return false
	}
	if d := s.at.Sub(f.updated()); d < 0 || d > sameSync {
		return false
	}
	for _, z := range mf.zeros {
		if z.sent.Before(from.Add(ru.Allowance)) || (z.carried[0] != s.seq && z.carried[1] != s.seq) {
			continue // too early, or the answer did not carry S as its newest sync
		}
		quiet := z.received.Add(ru.Allowance)
		if f.lastQuick.time().Before(quiet) {
			continue
		}
		if n.StalledSince(z.sent) || !ru.otherFamiliesIdle(n, f.family(), r, quiet) {
			return false
		}
		return true
	}
	return false
}

// queuedHeld is the queued-change rule, for an ambiguous sync S
// (Rule.ambiguous: it may predate the change): a quick answer of the
// process that answers healthz, sent at least D after from (our receipt
// r, or after a stall its catch-up: Node.resumed), showed S as the
// family's newest sync, measured, with the last change queued for the
// family before S started (metricsFacts.noteHeld). kube-proxy had the
// change by that answer (D is its lag behind us plus a sync), so the last
// change it had queued was that one or a later one; S started after it,
// and a sync takes every change queued before it starts (checkoutChanges
// runs after the start it measures from). So S holds the change. It needs
// no silence after S: it shares only rule 1's assumption (the change
// reaches kube-proxy within D), and the sync is dated by its stamp.
func (ru Rule) queuedHeld(n *Node, f *syncFacts, from time.Time) bool {
	if !f.healthy || !f.metricsSync || !n.sameProcess() {
		return false
	}
	mf := n.metrics // not nil: sameProcess
	s := mf.stampOf(f)
	fm := mf.family(f.family())
	if s == nil || !s.tied || fm == nil || fm.heldSeq != s.seq {
		return false
	}
	return !fm.heldSent.time().Before(from.Add(ru.Allowance))
}

// FirstProof is the first instant of our clock at which an answer of n
// can prove, by the queued-change rule (queuedHeld), a sync that ran right
// after the changes (targets: family → our receipt): D past the later of
// the receipt and, after a stall, its catch-up (Node.resumed), the latest
// over the families. Zero while n is stalled (a poll unanswered since it
// timed out: when it resumes is not known yet).
func (ru Rule) FirstProof(n *Node, targets map[discovery.AddressType]time.Time) time.Time {
	ru = ru.For(n)
	var at time.Time
	for fam, r := range targets {
		_, from := ru.since(n, n.sync(fam), r)
		if !from.Before(farFuture) {
			return time.Time{}
		}
		at = maxTime(at, from.Add(ru.Allowance))
	}
	return at
}

// otherFamiliesIdle says whether every family but fam ran no sync from
// before R − Lag until a quick answer sent at quiet or later: its newest
// sync completed before then and is still its newest at that answer.
func (ru Rule) otherFamiliesIdle(n *Node, fam discovery.AddressType, r, quiet time.Time) bool {
	for i := range n.syncs {
		g := &n.syncs[i]
		if g.family() == fam {
			continue
		}
		if !g.healthy || g.stepped || !g.latestAt().Before(r.Add(-ru.Lag)) || g.lastQuick.time().Before(quiet) {
			return false
		}
	}
	return true
}

// StalledSince says whether a stall of the node ended after t: it may not
// have been running for part of the time since.
func (n *Node) StalledSince(t time.Time) bool {
	for _, s := range n.stalls {
		if s.to.After(t) {
			return true
		}
	}
	return false
}

func absDuration(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}

// MetricsOff says the node's metrics are not read again (its port refused
// or did not answer): a sync healthz shows is judged without waiting for
// them to measure it; what they said before stands.
func (n *Node) MetricsOff() {
	if n.metrics != nil {
		n.metrics.off = true
	}
}

// MetricsOn says the node's metrics are read again after MetricsOff (they
// timed out while healthz showed kube-proxy stalled): a sync healthz shows
// waits for them to measure it again.
func (n *Node) MetricsOn() {
	if n.metrics != nil {
		n.metrics.off = false
	}
}

// For is the rule for node n. Where kube-proxy's metrics measured its
// syncs (the stamps kept, this drain, of the process that answers
// healthz), D is at least the longest of them plus the watch's skew (Lag,
// assumed to bound how late kube-proxy gets a change after us as it bounds
// how early): a sync that completed D after our receipt started after
// kube-proxy had the change only while one sync takes less than D less
// that skew, and under load kube-proxy's syncs took up to seconds
// (docs/routing.md). A larger D only delays confirmation. A sync that ran
// across a stall seen on the node is left out (slowestSync).
func (ru Rule) For(n *Node) Rule {
	if !n.sameProcess() {
		return ru
	}
	if s := n.slowestSync(); s > 0 {
		ru.Allowance = max(ru.Allowance, max(ru.Lag, 0)+s)
	}
	return ru
}

// slowestSync is the longest sync the metrics measured, leaving out each
// that surely ran across a stall in which a poll went unanswered for its
// whole timeout: a freeze (SIGSTOP, a paused VM) stretches the sync under
// way by its length, and that sync, measured by its wall time, held D at
// seconds for the node's next syncs, past the drain's bound, although
// they run at the speed they did before (the frozen matrix, 2026-12-06).
// What such a stall means for a sync is the stall rule's (Node.reference:
// it completed after the stall began, so it is judged from the stall's
// end plus the catch-up), and that sync's own duration still bounds its
// start (ownTook, Rule.judge). What is given up: where the stall was a
// network that dropped our polls while a loaded kube-proxy ran a slow
// sync, that sync no longer raises D for the syncs after it; the syncs
// measured outside stalls still do.
func (n *Node) slowestSync() time.Duration {
	if n.metrics == nil {
		return 0
	}
	var d time.Duration
	for i := range n.metrics.fams {
		for _, s := range n.metrics.fams[i].stamps {
			if s.took > d && !n.spansStall(s) {
				d = s.took
			}
		}
	}
	return d
}

// spansStall says whether the sync stamped s surely ran across a
// timed-out stall: whatever our clock's offset from the node's within
// the last answer's round trip (bounded by quickAnswer), it completed
// after the stall began and started before it ended.
func (n *Node) spansStall(s metricsStamp) bool {
	if s.took <= 0 {
		return false
	}
	earliest := s.at.Add(-n.healthzAhead) // our clock: the node's stamp, less its lead
	latest := earliest.Add(quickAnswer)
	for _, st := range n.stalls {
		if st.timedOut && !earliest.Before(st.from) && !latest.Add(-s.took).After(st.to) {
			return true
		}
	}
	return false
}

// ownTook is how long the sync healthz shows for f took, where the
// metrics measured it; 0 where they did not.
func (n *Node) ownTook(f *syncFacts) time.Duration {
	if !n.sameProcess() || n.metrics == nil {
		return 0
	}
	if s := n.metrics.stampOf(f); s != nil {
		return max(s.took, 0)
	}
	return 0
}

// stampOf is the metrics' stamp of the sync healthz shows for f (stamped
// within sameSync after healthz's); nil when they kept none.
func (mf *metricsFacts) stampOf(f *syncFacts) *metricsStamp {
	fm := mf.family(f.family())
	if fm == nil {
		return nil
	}
	for i := range fm.stamps {
		if d := fm.stamps[i].at.Sub(f.updated()); d >= 0 && d <= sameSync {
			return &fm.stamps[i]
		}
	}
	return nil
}

// measured says whether the sync healthz shows for f may be judged by
// when it completed: kube-proxy's metrics are not read for n (or come from
// another process), or they measured how long that sync took (For), or
// they cannot (no histogram; counted before the first answer). False while
// the metrics have not yet shown it: the next answer will, a moment after
// healthz's (readMetrics follows every healthz answer of a node not yet
// confirmed).
func (n *Node) measured(f *syncFacts) bool {
	if !n.sameProcess() || n.metrics.off {
		return true
	}
	fm := n.metrics.family(f.family())
	if fm == nil || !fm.counted {
		return true
	}
	if s := n.metrics.stampOf(f); s != nil {
		return s.took != tookUnknown
	}
	// Not shown by the metrics yet, or older than every stamp they kept (a
	// newer sync then exists, and healthz shows it next).
	return false
}
