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

// metricsFacts is what kube-proxy's metrics said, for one process.
type metricsFacts struct {
	start  time.Time                             // process_start_time_seconds; zero until read
	stamps map[discovery.AddressType][]time.Time // successful syncs seen, oldest first
	zeros  []zeroRead                            // answers with 0 pending changes, oldest first
	latest map[discovery.AddressType]time.Time   // the newest stamp per family
}

// zeroRead is an answer that had no pending change: sent at our clock,
// with the family stamps it carried.
type zeroRead struct {
	sent   time.Time
	stamps map[discovery.AddressType]time.Time
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
		for _, f := range n.syncs {
			// A stamp healthz showed at or after the new start may be
			// that instance's start stamp.
			if !f.metricsSync && !f.lastUpdated.Before(m.ProcessStart.Add(-startSlack)) {
				f.startStamp = true
			}
		}
		*mf = metricsFacts{}
	}
	mf.start = m.ProcessStart
	if mf.stamps == nil {
		mf.stamps = map[discovery.AddressType][]time.Time{}
		mf.latest = map[discovery.AddressType]time.Time{}
	}
	for fam, t := range m.Synced {
		if t.IsZero() {
			continue
		}
		if old, ok := mf.latest[fam]; !ok || t.After(old) {
			mf.latest[fam] = t
			s := append(mf.stamps[fam], t)
			if len(s) > maxMetricsStamps {
				s = s[1:]
			}
			mf.stamps[fam] = s
		}
	}
	if m.HasPending && m.Pending == 0 {
		z := zeroRead{sent: sent, stamps: map[discovery.AddressType]time.Time{}}
		for fam, t := range mf.latest {
			z.stamps[fam] = t
		}
		mf.zeros = append(mf.zeros, z)
		if len(mf.zeros) > maxZeroReads {
			mf.zeros = mf.zeros[1:]
		}
	}
	if n.sameProcess() {
		for fam, f := range n.syncs {
			if !f.metricsSync {
				f.metricsSync = mf.synced(fam, f.lastUpdated, n.connFirst)
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
	for _, t := range mf.stamps[fam] {
		if d := t.Sub(lastUpdated); d >= 0 && d <= sameSync {
			return true
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
	latest, ok := mf.latest[fam]
	if !ok {
		return false
	}
	for _, z := range mf.zeros {
		if z.sent.Before(r.Add(ru.Allowance)) {
			continue
		}
		if before, ok := z.stamps[fam]; !ok || latest.After(before) {
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
