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
	sent time.Time
	seq  uint64
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

// RecordMetrics keeps a metrics answer whose request was sent at sent. A
// process start other than the one read before is a restart, even when no
// poll failed: the next new healthz lastUpdated may be the new instance's
// start stamp, and what the old process's metrics said is dropped. It
// says whether it saw a restart (for the log).
func (n *Node) RecordMetrics(m Metrics, sent time.Time) (restarted bool) {
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
		mf.zeros = appendBounded(mf.zeros, zeroRead{sent: sent, seq: mf.seq}, maxZeroReads)
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

func absDuration(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}
