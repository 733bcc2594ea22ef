package judge

import (
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
//   - process_start_time_seconds: the process that answers;
//   - kubeproxy_sync_proxy_rules_endpoint_changes_pending: raised when
//     kube-proxy receives an EndpointSlice change, set to 0 when a sync
//     takes the pending changes, at its start (endpointschangetracker.go
//     checkoutChanges), not when its rules are written.
//
// Times are the node's clock.
type Metrics struct {
	ProcessStart time.Time                           // zero: not in the answer
	Synced       map[discovery.AddressType]time.Time // last successful sync per family
	Pending      int
	HasPending   bool // the pending gauge was in the answer
}

// sameSync bounds how far after healthz's per-family stamp the metrics'
// stamp of the same sync is: kube-proxy sets the two one after the other
// (iptables/proxier.go: healthzServer.Updated, then SetToCurrentTime),
// microseconds apart; a sync takes far longer than this.
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
	// seq counts the stamps taken, every family: a family's newest stamp
	// and an answer with no pending change are ordered by it.
	seq uint64
}

// metricsFamily is the successful syncs seen of one family, oldest first:
// a stamp is taken only when newer than the last, so the last is the
// newest; seq is the metricsFacts.seq at which it was taken.
type metricsFamily struct {
	fam    discovery.AddressType
	stamps []time.Time
	seq    uint64
}

// zeroRead is an answer that had no pending change: sent at our clock,
// taken when seq stamps had been. A family whose newest stamp has a
// larger seq had a successful sync newer than the one it carried, or had
// none then.
type zeroRead struct {
	sent, received time.Time
	seq            uint64
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

// take keeps a successful sync of fam stamped t, when it is newer than
// the newest kept.
func (mf *metricsFacts) take(fam discovery.AddressType, t time.Time) {
	f := mf.family(fam)
	if f == nil {
		mf.fams = append(mf.fams, metricsFamily{fam: fam})
		f = &mf.fams[len(mf.fams)-1]
	}
	if len(f.stamps) > 0 && !t.After(f.stamps[len(f.stamps)-1]) {
		return
	}
	mf.seq++
	f.seq = mf.seq
	f.stamps = appendBounded(f.stamps, t, maxMetricsStamps)
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

// RecordMetrics keeps a metrics answer whose request was sent at sent and
// whose answer was in by received (our clock). A
// process start other than the one read before is a restart, even when no
// poll failed: the next new healthz lastUpdated may be the new instance's
// start stamp, and what the old process's metrics said is dropped. It
// says whether it saw a restart (for the log).
func (n *Node) RecordMetrics(m Metrics, sent, received time.Time) (restarted bool) {
	if m.ProcessStart.IsZero() {
		return false // without it no answer can be tied to a process
	}
	mf := &n.metrics
	if !mf.start.IsZero() && absDuration(m.ProcessStart.Sub(mf.start)) >= startSlack {
		restarted = true
		n.restarted = true
		for i := range n.syncs {
			// A stamp healthz showed at or after the new start may be
			// that instance's start stamp.
			if f := &n.syncs[i]; !f.metricsSync && !f.lastUpdated.Before(m.ProcessStart.Add(-startSlack)) {
				f.startStamp = true
			}
		}
		*mf = metricsFacts{}
	}
	mf.start = m.ProcessStart
	for fam, t := range m.Synced {
		if !t.IsZero() {
			mf.take(fam, t)
		}
	}
	if m.HasPending && m.Pending == 0 {
		mf.zeros = appendBounded(mf.zeros, zeroRead{sent: sent, received: received, seq: mf.seq}, maxZeroReads)
	}
	if n.sameProcess() {
		for i := range n.syncs {
			if f := &n.syncs[i]; !f.metricsSync {
				f.metricsSync = mf.synced(f.fam, f.lastUpdated, n.connFirst)
			}
		}
	}
	return restarted
}

// sameProcess says whether the metrics came from the process that
// answers healthz: one started before that connection's first answer.
// A process started after it is another kube-proxy, whose metrics say
// nothing of the answers on that connection.
func (n *Node) sameProcess() bool {
	return !n.metrics.start.IsZero() && !n.connFirst.IsZero() && !n.metrics.start.After(n.connFirst.Add(startSlack))
}

// synced says whether a healthz lastUpdated of fam is a successful sync
// in the metrics of the process that answered healthz first at connFirst:
// a metrics stamp at most sameSync after it.
func (mf *metricsFacts) synced(fam discovery.AddressType, lastUpdated, connFirst time.Time) bool {
	if mf.start.IsZero() || connFirst.IsZero() || mf.start.After(connFirst.Add(startSlack)) {
		return false
	}
	if f := mf.family(fam); f != nil {
		for _, t := range f.stamps {
			if d := t.Sub(lastUpdated); d >= 0 && d <= sameSync {
				return true
			}
		}
	}
	return false
}

// pendingSynced is the pending-changes rule: an answer of the process
// that answers healthz had no pending change, sent at least D after our
// receipt r (kube-proxy had the change by then, D being its lag behind us
// plus a sync), and a later answer shows a successful sync newer than the
// one it carried. The 0 says a sync took the change; it is set when the
// sync starts, so only a sync completed after it proves the rules hold it.
// A sync that completed before that answer proves nothing here: the
// healthz rules judge it.
func (ru Rule) pendingSynced(n *Node, f *syncFacts, fam discovery.AddressType, r time.Time) bool {
	if !f.healthy || !n.sameProcess() {
		return false
	}
	mf := &n.metrics
	latest := mf.family(fam)
	if latest == nil {
		return false
	}
	for _, z := range mf.zeros {
		if z.sent.Before(r.Add(ru.Allowance)) {
			continue
		}
		if latest.seq > z.seq { // a stamp newer than the answer's, or its first
			return true
		}
	}
	return false
}

// pendingQuiet is the silence rule sped up by the pending gauge, for an
// ambiguous sync S (Rule.ambiguous: it may predate the change) of a
// kube-proxy that runs one family. An answer of the process that answers
// healthz had no pending change, sent at least D after from (our receipt
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
	mf := &n.metrics
	fm := mf.family(f.fam)
	if fm == nil || len(fm.stamps) == 0 {
		return false
	}
	// S must be the newest sync the metrics hold.
	if d := fm.stamps[len(fm.stamps)-1].Sub(f.lastUpdated); d < 0 || d > sameSync {
		return false
	}
	for _, z := range mf.zeros {
		if z.sent.Before(from.Add(ru.Allowance)) || z.seq < fm.seq {
			continue // too early, or S was not yet its newest sync
		}
		quiet := z.received.Add(ru.Allowance)
		if f.lastQuick.Before(quiet) {
			continue
		}
		if n.stalledSince(z.sent) || !ru.otherFamiliesIdle(n, f.fam, r, quiet) {
			return false
		}
		return true
	}
	return false
}

// otherFamiliesIdle says whether every family but fam ran no sync from
// before R − Lag until a quick answer sent at quiet or later: its newest
// sync completed before then and is still its newest at that answer.
func (ru Rule) otherFamiliesIdle(n *Node, fam discovery.AddressType, r, quiet time.Time) bool {
	for i := range n.syncs {
		g := &n.syncs[i]
		if g.fam == fam {
			continue
		}
		if !g.healthy || g.stepped || !g.latest.Before(r.Add(-ru.Lag)) || g.lastQuick.Before(quiet) {
			return false
		}
	}
	return true
}

// stalledSince says whether a stall of the node ended after t: it may not
// have been running for part of the time since.
func (n *Node) stalledSince(t time.Time) bool {
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
