package judge

import (
	"testing"
	"time"

	discovery "k8s.io/api/discovery/v1"

	"github.com/hapsuper/hapsuper/drain"
)

// metrics: kube-proxy's /metrics answered a request sent at `at`, 5 ms later: its
// process started at `start`, its last successful IPv4 sync at `sync`
// (offsets from t0), with `pending` changes pending (-1: not in the
// answer).
func (s *nodeScenario) metrics(at, start, sync time.Duration, pending int) MetricsNote {
	m := Metrics{ProcessStart: s.t0.Add(start), Synced: map[discovery.AddressType]time.Time{
		discovery.AddressTypeIPv4: s.t0.Add(sync)}, Pending: max(pending, 0), HasPending: pending >= 0}
	return s.n.RecordMetrics(m, s.t0.Add(at), s.t0.Add(at+5*ms))
}

func (s *nodeScenario) expectWitness(want string) {
	s.t.Helper()
	if w := s.rule.Witness(s.n, map[discovery.AddressType]time.Time{discovery.AddressTypeIPv4: s.r}); w != want {
		s.t.Errorf("witness %q, want %q", w, want)
	}
}

const hour = time.Hour

// A lastUpdated first seen on a new connection after the change may be a
// restarted kube-proxy's start stamp; the metrics of that process holding
// a successful sync stamped with it (microseconds later) make it a sync.
func TestWitnessStampEqualsMetricsSync(t *testing.T) {
	s := newNodeScenario(t)
	s.answer(1500*ms, 10*ms, 1400*ms) // first answer, 400 ms after the change
	s.expect(NodePending, "first seen on a new connection")
	s.expectWitness("")
	s.metrics(1520*ms, -hour, 1400*ms+20*time.Microsecond, 0)
	s.expect(NodeConfirmed, "")
	s.expectWitness(WitnessMetrics)
}

// The metrics read first, then healthz: a sync completed between a
// healthz answer and the metrics read after it shows in the metrics first;
// the stamp is matched when healthz shows it.
func TestWitnessMetricsBeforeHealthz(t *testing.T) {
	s := newNodeScenario(t)
	s.answer(1400*ms, 10*ms, 400*ms)
	s.metrics(1415*ms, -hour, 1410*ms+20*time.Microsecond, 0)
	s.fresh = true
	s.answer(1500*ms, 10*ms, 1410*ms)
	s.expect(NodeConfirmed, "")
	s.expectWitness(WitnessMetrics)
}

// Confirmed by healthz alone: the witness says so.
func TestWitnessHealthzAlone(t *testing.T) {
	s := newNodeScenario(t)
	s.answer(500*ms, 10*ms, 400*ms)
	s.metrics(520*ms, -hour, 400*ms, 0)
	s.answer(1500*ms, 10*ms, 1400*ms) // a sync on the same connection
	s.expect(NodeConfirmed, "")
	s.expectWitness(WitnessHealthz)
}

// A metrics stamp that does not match healthz's proves nothing.
func TestWitnessMetricsDisagree(t *testing.T) {
	s := newNodeScenario(t)
	s.answer(1500*ms, 10*ms, 1400*ms)
	s.metrics(1520*ms, -hour, 1450*ms, 0) // 50 ms after: another sync
	s.expect(NodePending, "first seen on a new connection")
	s.metrics(1530*ms, -hour, 1400*ms-time.Millisecond, 0) // before it
	s.expect(NodePending, "first seen on a new connection")
}

// Metrics from a process started after healthz's connection first answered
// are another kube-proxy's: they prove nothing of that answer.
func TestWitnessMetricsFromAnotherProcess(t *testing.T) {
	s := newNodeScenario(t)
	s.answer(1500*ms, 10*ms, 1400*ms)
	s.metrics(4000*ms, 3000*ms, 1400*ms+20*time.Microsecond, 0)
	s.expect(NodePending, "first seen on a new connection")
}

// A new process start in the metrics drops what the old one's said and
// holds no healthz stamp: healthz's own rules see a restart (a failed
// poll, a closed connection, a first answer on a new one), and a later
// stamp on the connection that answered before is a sync.
func TestWitnessNewStartHoldsNothing(t *testing.T) {
	s := newNodeScenario(t)
	s.answer(500*ms, 10*ms, 400*ms)
	if got := s.metrics(520*ms, -hour, 400*ms+20*time.Microsecond, 0); got != MetricsTaken {
		t.Fatalf("the first metrics answer: note %d, want taken", got)
	}
	if got := s.metrics(1300*ms, 1200*ms, 400*ms, 0); got != MetricsRestarted {
		t.Fatalf("a new process start after a tied one: note %d, want restarted", got)
	}
	if s.n.metrics.tied() {
		t.Error("the old process's stamps kept after a new start")
	}
	s.answer(1500*ms, 10*ms, 1450*ms)
	s.expect(NodeConfirmed, "")
	s.expectWitness(WitnessHealthz)
}

// No pending change, read D after the change in an answer tied to healthz,
// then a newer successful sync, tied when healthz shows it: that sync
// holds the change, though healthz, its request 70 ms on the way, places
// it before R + D.
func TestWitnessPendingZeroThenSync(t *testing.T) {
	s := newNodeScenario(t) // R = t0+1s
	s.answer(500*ms, 10*ms, 400*ms)
	s.answer(1100*ms, 10*ms, 1050*ms) // in flight at the change
	s.expect(NodePending, "may predate the change")
	s.metrics(1200*ms, -hour, 1050*ms+20*time.Microsecond, 0) // too soon after the change
	s.expect(NodePending, "may predate the change")
	s.metrics(1260*ms, -hour, 1050*ms+20*time.Microsecond, 0) // D after it: kube-proxy had it
	s.expect(NodePending, "may predate the change")
	h := Healthz{CurrentTime: s.t0.Add(1340 * ms), Families: map[discovery.AddressType]FamilyHealth{
		discovery.AddressTypeIPv4: {LastUpdated: s.t0.Add(1300 * ms), Healthy: true}}}
	s.n.Record(h, s.t0.Add(1270*ms), s.t0.Add(1345*ms), s.rule.Allowance, true)
	s.expect(NodePending, "may predate the change")
	s.metrics(1345*ms, -hour, 1300*ms+20*time.Microsecond, 0) // the sync after that read, tied
	s.expect(NodeConfirmed, "")
	s.expectWitness(WitnessMetrics)
}

// Pending changes, or none from another process, or none in an answer
// tied to no healthz stamp, confirm nothing.
func TestWitnessPendingNotZero(t *testing.T) {
	for _, tc := range []struct {
		name                string
		start, zero, synced time.Duration
		pending             int
	}{
		{"changes pending", -hour, 1050*ms + 20*time.Microsecond, 1300*ms + 20*time.Microsecond, 1},
		{"another process", 2000 * ms, 1050*ms + 20*time.Microsecond, 1300*ms + 20*time.Microsecond, 0},
		{"untied zero", -hour, 1070 * ms, 1300*ms + 20*time.Microsecond, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newNodeScenario(t)
			s.answer(500*ms, 10*ms, 400*ms)
			s.answer(1100*ms, 10*ms, 1050*ms)
			s.metrics(1260*ms, tc.start, tc.zero, tc.pending)
			h := Healthz{CurrentTime: s.t0.Add(1340 * ms), Families: map[discovery.AddressType]FamilyHealth{
				discovery.AddressTypeIPv4: {LastUpdated: s.t0.Add(1300 * ms), Healthy: true}}}
			s.n.Record(h, s.t0.Add(1270*ms), s.t0.Add(1345*ms), s.rule.Allowance, true)
			s.metrics(1345*ms, tc.start, tc.synced, tc.pending)
			s.expect(NodePending, "may predate the change")
		})
	}
}

// After a failed poll a new lastUpdated may be a start stamp; the metrics
// of the process that answers holding it as a successful sync make it one.
func TestWitnessStartStampAfterFailure(t *testing.T) {
	s := newNodeScenario(t)
	s.answer(500*ms, 10*ms, 400*ms)
	s.n.Failed(&PollError{Msg: "connection refused"}, s.t0.Add(1100*ms), s.t0.Add(1110*ms))
	s.fresh = true // the refused connection's successor
	s.answer(1500*ms, 10*ms, 1450*ms)
	s.expect(NodePending, "restarted kube-proxy's start")
	s.metrics(1520*ms, -hour, 1450*ms+20*time.Microsecond, 0)
	s.expect(NodeConfirmed, "")
	s.expectWitness(WitnessMetrics)
}

// The verdict names the nodes the metrics witness confirmed: n2's first
// answer after the change shows a stamp (R+400ms) that its metrics hold as
// a successful sync; n1's sync shows on the baseline's connection.
func TestScenarioMetricsWitnessNamed(t *testing.T) {
	c := newLateCluster(t, "n1", "n2")
	c.answer("n1", 0)
	c.syncsAt("n1", discovery.AddressTypeIPv4, -5*time.Second, 400*ms)
	c.syncsAt("n2", discovery.AddressTypeIPv4, -5*time.Second, 400*ms)
	expectRouting(t, c.round(500*ms, "n1", "n2"), drain.RoutingPending, "n2: IPv4: lastUpdated first seen on a new connection")
	c.proxies["n2"].n.RecordMetrics(Metrics{ProcessStart: c.R.Add(-hour),
		Synced: map[discovery.AddressType]time.Time{discovery.AddressTypeIPv4: c.R.Add(400*ms + 20*time.Microsecond)}}, c.R.Add(510*ms), c.R.Add(515*ms))
	expectRouting(t, c.judge(c.R.Add(520*ms)), drain.RoutingWithdrawn,
		"confirmed by kube-proxy on 2 nodes (witness: healthz on 1, metrics on 1: n2)")
}

// An answer with no pending change and no sync stamp ties to no healthz
// answer: any exporter with a process start serves one. Its zero counts
// for nothing, whatever stamp comes after.
func TestWitnessPendingZeroWithoutStamp(t *testing.T) {
	s := newNodeScenario(t)
	s.answer(500*ms, 10*ms, 400*ms)
	s.answer(1100*ms, 10*ms, 1050*ms)
	none := Metrics{ProcessStart: s.t0.Add(-hour), HasPending: true}
	s.n.RecordMetrics(none, s.t0.Add(1300*ms), s.t0.Add(1305*ms))
	s.expect(NodePending, "may predate the change")
	h := Healthz{CurrentTime: s.t0.Add(1340 * ms), Families: map[discovery.AddressType]FamilyHealth{
		discovery.AddressTypeIPv4: {LastUpdated: s.t0.Add(1310 * ms), Healthy: true}}}
	s.n.Record(h, s.t0.Add(1270*ms), s.t0.Add(1345*ms), s.rule.Allowance, true)
	s.metrics(1345*ms, -hour, 1310*ms+20*time.Microsecond, 1)
	s.expect(NodePending, "may predate the change")
}

// A node keeps the last maxMetricsStamps stamps and maxZeroReads answers
// with no pending change: a healthz stamp matches one of those, not an
// older one, and the newest decides the pending rule.
func TestWitnessBoundedHistory(t *testing.T) {
	s := newNodeScenario(t)
	s.answer(500*ms, 10*ms, 400*ms)
	for i := range maxMetricsStamps + 1 { // stamps at 2000, 2020, … ms: more than sameSync apart
		s.metrics(2000*ms+time.Duration(i)*20*ms, -hour, 2000*ms+time.Duration(i)*20*ms, 1)
	}
	s.fresh = true                    // first seen on a new connection: only the metrics make these a sync
	s.answer(2400*ms, 10*ms, 2000*ms) // dropped
	s.expect(NodePending, "first seen on a new connection")
	s.fresh = true
	s.answer(2500*ms, 10*ms, 2020*ms) // the oldest stamp kept
	s.expect(NodeConfirmed, "")

	s = newNodeScenario(t)
	s.answer(500*ms, 10*ms, 400*ms)
	s.answer(1100*ms, 10*ms, 1050*ms)
	for i := range maxZeroReads + 2 {
		s.metrics(1300*ms+time.Duration(i)*10*ms, -hour, 1050*ms+20*time.Microsecond, 0)
	}
	if got := len(s.n.metrics.zeros); got != maxZeroReads {
		t.Errorf("%d answers with no pending change kept, want %d", got, maxZeroReads)
	}
	s.expect(NodePending, "may predate the change")
}

// pendingQuietScenario: the baseline at R−100ms on the connection that
// then carries the rest; an ambiguous sync S at R+50ms (after R − Lag,
// before R + D), shown at R+100ms; then metrics sent at R+300ms (≥ R + D)
// with no pending change and S as the newest sync.
func pendingQuietScenario(t *testing.T) *nodeScenario {
	s := newNodeScenario(t)
	s.answer(900*ms, 10*ms, -5*time.Second)
	s.answer(1100*ms, 10*ms, 1050*ms)
	s.metrics(1300*ms, -hour, 1050*ms+20*time.Microsecond, 0)
	return s
}

// A zero read at R + D that carries S as the newest sync, then a quick
// answer sent D after it still showing S: a sync had taken the change by
// the zero, and none was running (it would have shown within D), so S
// holds it. The silence rule alone waits for MinSync + D of silence.
func TestWitnessPendingQuietConfirmsAnAmbiguousSync(t *testing.T) {
	s := pendingQuietScenario(t)
	s.answer(1400*ms, 10*ms, 1050*ms) // 95 ms after the zero was in: too soon
	s.expect(NodePending, "may predate the change")
	s.answer(1600*ms, 10*ms, 1050*ms) // 295 ms after: ≥ D
	s.expect(NodeConfirmed, "")
	s.expectWitness(WitnessMetrics)
}

// Without the zero read, or with one sent before R + D, the same answers
// leave S to the silence rule.
func TestWitnessPendingQuietNeedsAZeroAfterTheAllowance(t *testing.T) {
	for _, tc := range []struct {
		name   string
		zeroAt time.Duration // -1: no metrics
	}{{"no metrics", -1}, {"zero read before R + D", 1200 * ms}} {
		t.Run(tc.name, func(t *testing.T) {
			s := newNodeScenario(t)
			s.answer(900*ms, 10*ms, -5*time.Second)
			s.answer(1100*ms, 10*ms, 1050*ms)
			if tc.zeroAt >= 0 {
				s.metrics(tc.zeroAt, -hour, 1050*ms+20*time.Microsecond, 0)
			}
			s.answer(1600*ms, 10*ms, 1050*ms)
			s.answer(1800*ms, 10*ms, 1050*ms)
			s.expect(NodePending, "may predate the change")
		})
	}
}

// A slow answer after the zero: kube-proxy may have been frozen with the
// sync that took the change unfinished; the quiet proves nothing.
func TestWitnessPendingQuietVoidedByAStall(t *testing.T) {
	s := pendingQuietScenario(t)
	s.answer(1400*ms, 300*ms, 1050*ms) // held 300 ms: a stall
	s.answer(1800*ms, 10*ms, 1050*ms)
	s.expect(NodePending, "may predate the change")
}

// A kube-proxy that runs both families: the gauge is shared, and the IPv6
// proxier's sync zeroes it while the IPv4 change waits. A zero read
// proves the IPv4 checkout only when IPv6 ran no sync from before the
// change until D after the zero: its newest sync completed before R − Lag
// and is still its newest then.
func TestWitnessPendingQuietWithTwoFamilies(t *testing.T) {
	for _, tc := range []struct {
		name       string
		v6, v6Late time.Duration // IPv6's sync before, and at the last answer
		want       NodeVerdict
	}{
		{"IPv6 idle", -40 * time.Second, -40 * time.Second, NodeConfirmed},
		{"IPv6 synced with the change", 1050 * ms, 1050 * ms, NodePending},
		{"IPv6 synced after the zero", -40 * time.Second, 1500 * ms, NodePending},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newNodeScenario(t)
			both := func(at, v4, v6 time.Duration) {
				sent := s.t0.Add(at)
				h := Healthz{CurrentTime: sent.Add(5 * ms), Families: map[discovery.AddressType]FamilyHealth{
					discovery.AddressTypeIPv4: {LastUpdated: s.t0.Add(v4), Healthy: true},
					discovery.AddressTypeIPv6: {LastUpdated: s.t0.Add(v6), Healthy: true}}}
				s.n.Record(h, sent, sent.Add(10*ms), s.rule.Allowance, s.n.Answered())
			}
			both(900*ms, -5*time.Second, tc.v6)
			both(1100*ms, 1050*ms, tc.v6)
			s.metrics(1300*ms, -hour, 1050*ms+20*time.Microsecond, 0)
			both(1600*ms, 1050*ms, tc.v6Late)
			why := "may predate the change"
			if tc.want == NodeConfirmed {
				why = ""
			}
			s.expect(tc.want, why)
		})
	}
}

// A sync that completed before kube-proxy can have had the change, then
// quiet with no pending change: a kube-proxy cut off from the apiserver
// never got the change and has nothing pending. Only a newer sync
// confirms it.
func TestWitnessPendingQuietNotForASyncBeforeTheChange(t *testing.T) {
	s := newNodeScenario(t)
	s.answer(900*ms, 10*ms, 500*ms) // R−500ms: before R − Lag
	s.answer(1100*ms, 10*ms, 500*ms)
	s.metrics(1300*ms, -hour, 500*ms+20*time.Microsecond, 0)
	s.answer(1600*ms, 10*ms, 500*ms)
	s.expect(NodePending, "no sync since the change")
}

// The metrics witness on: a kube-proxy restarted just before the baseline
// stamped its SyncLoop's start at R−46ms, and the baseline's answer, first
// on its connection, shows it; its metrics hold no IPv4 sync (a start
// stamp is never a metrics timestamp) while its informers list. Nothing
// ties those metrics to healthz's answers (a listener that is not
// kube-proxy serves the same), so they count for nothing: the node is
// judged as healthz alone judges it, answer by answer — here silence
// confirms the stamp, docs/routing.md's known limit of healthz.
func TestWitnessUntiedMetricsChangeNothing(t *testing.T) {
	s := newNodeScenario(t) // R = t0+1s
	alone := &nodeScenario{t: t, t0: s.t0, n: NewNode("n1", "10.0.0.1:10256"), rule: s.rule, r: s.r}
	noSync := func(at time.Duration) {
		s.n.RecordMetrics(Metrics{ProcessStart: s.t0.Add(700 * ms), HasPending: true,
			Synced: map[discovery.AddressType]time.Time{}}, s.t0.Add(at), s.t0.Add(at+5*ms))
	}
	confirmed := false
	for at := 900 * ms; at <= 2900*ms; at += 200 * ms {
		s.answer(at, 10*ms, 954*ms)
		alone.answer(at, 10*ms, 954*ms)
		noSync(at + 15*ms)
		want, _ := alone.rule.Node(alone.n, map[discovery.AddressType]time.Time{discovery.AddressTypeIPv4: s.r})
		got, why := s.rule.Node(s.n, map[discovery.AddressType]time.Time{discovery.AddressTypeIPv4: s.r})
		if got != want {
			t.Fatalf("at t0+%v: verdict %d (%q) with untied metrics, %d with healthz alone", at, got, why, want)
		}
		confirmed = confirmed || got == NodeConfirmed
	}
	if !confirmed {
		t.Error("never confirmed: the scenario no longer reaches the silence rule")
	}
}

// The pending rule's quiet form with both families, after a slow answer.
// kube-proxy gets the withdrawal at R+74ms while an IPv4 sync runs
// without it (R+2ms to R+168ms); the IPv6 sync starting at R+125ms zeroes
// the one pending gauge while the IPv4 change waits, and ends at R+275ms.
// The baseline came back slow (R−250ms to R+125ms: a stall), so the rule
// judges against the stall's catch-up, R+500ms; but the other family must
// have been idle since before kube-proxy can first have had the change,
// R − Lag, whatever the stall: its sync at R+275ms took the zero. The
// IPv4 sync that holds the change only starts at R+1.168s.
func TestWitnessQuietOtherFamilyAfterAStall(t *testing.T) {
	s := newNodeScenario(t) // R = t0+1s
	v4, v6 := discovery.AddressTypeIPv4, discovery.AddressTypeIPv6
	answer := func(sent, read, received, sync4, sync6 time.Duration) {
		h := Healthz{CurrentTime: s.t0.Add(read), Families: map[discovery.AddressType]FamilyHealth{
			v4: {LastUpdated: s.t0.Add(sync4), Healthy: true}, v6: {LastUpdated: s.t0.Add(sync6), Healthy: true}}}
		s.n.Record(h, s.t0.Add(sent), s.t0.Add(received), s.rule.Allowance, s.n.Answered())
	}
	metrics := func(sent, received, sync4, sync6 time.Duration) {
		s.n.RecordMetrics(Metrics{ProcessStart: s.t0.Add(-hour), HasPending: true, Synced: map[discovery.AddressType]time.Time{
			v4: s.t0.Add(sync4 + 20*time.Microsecond), v6: s.t0.Add(sync6 + 20*time.Microsecond)}}, s.t0.Add(sent), s.t0.Add(received))
	}
	answer(750*ms, 1116*ms, 1125*ms, -218*ms, 125*ms) // the baseline, slow: a stall
	metrics(1125*ms, 1132*ms, -218*ms, 125*ms)
	answer(1320*ms, 1327*ms, 1335*ms, 1168*ms, 1275*ms)
	metrics(1335*ms, 1344*ms, 1168*ms, 1275*ms)
	answer(1858*ms, 1859*ms, 1860*ms, 1168*ms, 1275*ms)
	metrics(1860*ms, 1873*ms, 1168*ms, 1275*ms) // 0 pending: the IPv6 sync's checkout
	answer(2128*ms, 2137*ms, 2138*ms, 1168*ms, 1275*ms)
	s.expect(NodePending, "may predate the change")
}

// A zero pending gauge read right after a resume: the sync started at the
// resume zeroed it before the resumed informer delivered the change, and
// that sync lacked it. A zero proves the change taken only from D past the
// stall's catch-up.
func TestWitnessPendingZeroAfterStall(t *testing.T) {
	s := newNodeScenario(t)    // R = t0+1s
	s.answer(500*ms, 10*ms, 0) // baseline: the last sync 1 s before R
	s.metrics(520*ms, -hour, 0, 0)
	s.n.Failed(&PollError{Pending: true, Msg: "accepted but did not answer within 1s"}, s.t0.Add(1300*ms), s.t0.Add(2300*ms))
	s.answer(1300*ms, 1705*ms, 0)   // the held answer, read after the resume at t0+3s
	s.metrics(3010*ms, -hour, 0, 0) // the sync started at the resume zeroed the gauge
	s.expect(NodePending, "no sync since the change")
	s.metrics(3200*ms, -hour, 3050*ms, 0) // that sync's stamp: it lacked the change
	s.expect(NodePending, "no sync since the change")
}

// A listener on the metrics port other than the process healthz answers
// for: kube-proxy binds metrics on 127.0.0.1 by default, so any
// hostNetwork pod may answer on the node's address, and its start, older
// than healthz's connection, proves nothing. Its stamps match no healthz
// lastUpdated; its "no pending change", then "a newer sync", must not
// confirm a node whose healthz shows no sync since the change.
func TestWitnessImpostorConfirmsNothing(t *testing.T) {
	s := newNodeScenario(t) // R = t0+1s
	s.answer(500*ms, 10*ms, -5*time.Second)
	s.metrics(515*ms, -hour, -30*time.Second, 1)
	for at := 1300 * ms; at <= 2500*ms; at += 200 * ms {
		s.answer(at, 10*ms, -5*time.Second)
		s.metrics(at+15*ms, -hour, at-100*ms, 0) // a newer stamp each time, none healthz's
		s.expect(NodePending, "no sync since the change")
	}
	s.expectWitness("")
}

// A stamp later than the healthz answer just before it (plus the time
// since that request and stepTolerance) is no sync of the process healthz
// answers for: the answer is refused. Taken, it would have stood as the
// newest sync for the process's life, and no later stamp, being older,
// would have been read.
func TestWitnessFarFutureStampRefused(t *testing.T) {
	s := newNodeScenario(t) // R = t0+1s
	s.answer(500*ms, 10*ms, 400*ms)
	far := Metrics{ProcessStart: s.t0.Add(-hour), HasPending: true,
		Synced: map[discovery.AddressType]time.Time{discovery.AddressTypeIPv4: time.Date(5000, 1, 1, 0, 0, 0, 0, time.UTC)}}
	s.n.RecordMetrics(far, s.t0.Add(515*ms), s.t0.Add(520*ms))
	s.fresh = true
	s.answer(1500*ms, 10*ms, 1400*ms) // first on a new connection: needs the metrics
	s.expect(NodePending, "first seen on a new connection")
	s.metrics(1515*ms, -hour, 1400*ms+20*time.Microsecond, 0)
	s.expect(NodeConfirmed, "")
	s.expectWitness(WitnessMetrics)
}

// A stamp older than the newest read resets what the metrics said rather
// than being ignored until the clock passes the newest. Here kube-proxy
// restarted 1.7 s after its previous start while the node's clock stepped
// back 2 s: the two starts read 0.3 s apart (one process, by the start
// time's resolution), and the new process's first sync reads 1 s before
// the old one's.
func TestWitnessBackwardsStampAfterRestart(t *testing.T) {
	s := newNodeScenario(t) // R = t0+1s
	s.answer(500*ms, 10*ms, 400*ms)
	s.metrics(515*ms, -500*ms, 400*ms+20*time.Microsecond, 0)
	s.n.Failed(&PollError{Msg: "connection refused"}, s.t0.Add(1100*ms), s.t0.Add(1101*ms))
	step := -2 * time.Second
	h := Healthz{CurrentTime: s.t0.Add(1505*ms + step), Families: map[discovery.AddressType]FamilyHealth{
		discovery.AddressTypeIPv4: {LastUpdated: s.t0.Add(1400*ms + step), Healthy: true}}}
	s.n.Record(h, s.t0.Add(1500*ms), s.t0.Add(1510*ms), s.rule.Allowance, false)
	s.expect(NodePending, "restarted kube-proxy's start")
	s.metrics(1515*ms, 1200*ms+step, 1400*ms+step+20*time.Microsecond, 0)
	s.expect(NodeConfirmed, "")
	s.expectWitness(WitnessMetrics)
}

// metricsTook is metrics with the IPv4 sync-duration histogram: `count`
// syncs run since the process started, taking `sum` in all.
func (s *nodeScenario) metricsTook(at, sync time.Duration, count uint64, sum time.Duration) MetricsNote {
	m := Metrics{ProcessStart: s.t0.Add(-hour),
		Synced:    map[discovery.AddressType]time.Time{discovery.AddressTypeIPv4: s.t0.Add(sync)},
		Durations: map[discovery.AddressType]SyncDurations{discovery.AddressTypeIPv4: {Count: count, Sum: sum.Seconds()}}}
	return s.n.RecordMetrics(m, s.t0.Add(at), s.t0.Add(at+5*ms))
}

// A sync that completed D after the change but took longer than D, less
// the watch's skew, started before kube-proxy can have had it: the
// metrics' histogram measures it, and the rule waits for a later sync.
// (Under load kube-proxy's syncs took up to 4.5 s, and healthz alone
// confirmed such a sync while its rules still held the pod.)
func TestWitnessSlowSyncIsNotLateEnough(t *testing.T) {
	s := newNodeScenario(t)
	s.answer(900*ms, 10*ms, 400*ms) // before the change
	s.metricsTook(905*ms, 400*ms, 10, time.Second)
	s.expect(NodePending, "no sync since the change")
	// A sync from 700 ms to 1400 ms: it began before the change (1 s).
	s.answer(1500*ms, 10*ms, 1400*ms)
	s.expect(NodePending, "waiting for kube-proxy's metrics to say how long it took")
	s.metricsTook(1520*ms, 1400*ms+20*time.Microsecond, 11, 1700*ms)
	s.expect(NodePending, "last sync may predate the change")
	if d := s.rule.For(s.n).Allowance; d != 800*ms+time.Microsecond {
		t.Errorf("allowance %v, want the 700 ms sync + the 100 ms skew", d)
	}
	// The next sync, 2400 ms to 2430 ms, holds the change.
	s.answer(2500*ms, 10*ms, 2430*ms)
	s.expect(NodePending, "waiting for kube-proxy's metrics")
	s.metricsTook(2520*ms, 2430*ms+20*time.Microsecond, 12, 1730*ms)
	s.expect(NodeConfirmed, "")
	s.expectWitness(WitnessHealthz)
}

// The same sync, 30 ms long, confirms once the metrics measured it.
func TestWitnessMeasuredSyncConfirms(t *testing.T) {
	s := newNodeScenario(t)
	s.answer(900*ms, 10*ms, 400*ms)
	s.metricsTook(905*ms, 400*ms, 10, time.Second)
	s.answer(1500*ms, 10*ms, 1400*ms)
	s.expect(NodePending, "waiting for kube-proxy's metrics")
	s.metricsTook(1520*ms, 1400*ms+20*time.Microsecond, 11, 1030*ms)
	s.expect(NodeConfirmed, "")
	if d := s.rule.For(s.n).Allowance; d != 250*ms {
		t.Errorf("allowance %v, want D: a 30 ms sync raises nothing", d)
	}
}

// kube-proxy stamps a sync's completion a moment before it counts its
// duration: an answer between the two shows the stamp with the count
// unmoved, and the next one measures it.
func TestWitnessStampBeforeItsDuration(t *testing.T) {
	s := newNodeScenario(t)
	s.answer(900*ms, 10*ms, 400*ms)
	s.metricsTook(905*ms, 400*ms, 10, time.Second)
	s.answer(1500*ms, 10*ms, 1400*ms)
	s.metricsTook(1520*ms, 1400*ms+20*time.Microsecond, 10, time.Second)
	s.expect(NodePending, "waiting for kube-proxy's metrics")
	s.metricsTook(1620*ms, 1400*ms+20*time.Microsecond, 11, 1600*ms)
	s.expect(NodePending, "last sync may predate the change")
}

// Where the metrics cannot measure a sync (no histogram in the answer, or
// the first answer read already counted it), D alone judges it, as
// healthz alone does.
func TestWitnessUnmeasuredSyncJudgedByD(t *testing.T) {
	s := newNodeScenario(t)
	s.answer(900*ms, 10*ms, 400*ms)
	s.metrics(905*ms, -hour, 400*ms, 0) // no histogram
	s.answer(1500*ms, 10*ms, 1400*ms)
	s.expect(NodeConfirmed, "")

	s = newNodeScenario(t)
	s.answer(1500*ms, 10*ms, 1400*ms)
	s.metricsTook(1520*ms, 1400*ms+20*time.Microsecond, 11, 1700*ms) // the first answer read
	s.expect(NodeConfirmed, "")
}

// A kube-proxy whose counter went back (a restart its start time does not
// show) is counted afresh: the answer after the reset measures nothing.
func TestWitnessDurationCounterReset(t *testing.T) {
	s := newNodeScenario(t)
	s.answer(900*ms, 10*ms, 400*ms)
	s.metricsTook(905*ms, 400*ms, 10, time.Second)
	s.answer(1500*ms, 10*ms, 1400*ms)
	s.metricsTook(1520*ms, 1400*ms+20*time.Microsecond, 2, 100*ms)
	s.expect(NodeConfirmed, "")
	if d := s.rule.For(s.n).Allowance; d != 250*ms {
		t.Errorf("allowance %v, want D", d)
	}
}

// A sync under way when kube-proxy froze is measured by its wall time,
// the freeze included: it does not raise D for the syncs after it (they
// run at their own speed), and the stall rule judges it. Here: a sync
// from 1200 ms to 4350 ms, frozen from 1300 ms to 4300 ms; the polls
// from 1250 ms go unanswered until the resume. Once kube-proxy has run
// MinSync + D past it without a newer sync, it is confirmed, not D =
// 3.25 s later.
func TestWitnessFreezeSpanningSyncLeavesD(t *testing.T) {
	s := newNodeScenario(t)
	s.answer(900*ms, 10*ms, 400*ms)
	s.metricsTook(905*ms, 400*ms, 10, time.Second)
	s.n.Failed(&PollError{Pending: true, Msg: "timed out"}, s.t0.Add(1250*ms), s.t0.Add(2250*ms))
	s.n.Failed(&PollError{Pending: true, Msg: "timed out"}, s.t0.Add(2250*ms), s.t0.Add(3250*ms))
	// The request sent at 1250 ms, served at the resume, on its connection.
	s.n.Record(Healthz{CurrentTime: s.t0.Add(4300 * ms), Proxy: ProxyKubeProxy, Families: map[discovery.AddressType]FamilyHealth{
		discovery.AddressTypeIPv4: {LastUpdated: s.t0.Add(400 * ms), Healthy: true}}},
		s.t0.Add(1250*ms), s.t0.Add(4305*ms), s.rule.Allowance, true)
	s.answer(4400*ms, 10*ms, 4350*ms)
	s.metricsTook(4415*ms, 4350*ms+20*time.Microsecond, 11, time.Second+3150*ms)
	if d := s.rule.For(s.n).Allowance; d != 250*ms {
		t.Errorf("allowance %v, want D: the 3.15 s sync ran across the freeze", d)
	}
	s.expect(NodePending, "last sync may predate the change")
	for at := 4650 * ms; at <= 5700*ms; at += 350 * ms {
		s.answer(at, 10*ms, 4350*ms)
	}
	s.expect(NodePending, "last sync may predate the change")
	s.answer(5960*ms, 10*ms, 4350*ms)
	s.expect(NodeConfirmed, "")
}

// A sync measured slow across an answer that was only slow (kube-proxy
// answered within the timeout: a loaded node, not a freeze) still raises
// D: the load that slowed the answer slows its syncs.
func TestWitnessSlowAnswerKeepsTheMeasuredSync(t *testing.T) {
	s := newNodeScenario(t)
	s.answer(900*ms, 10*ms, 400*ms)
	s.metricsTook(905*ms, 400*ms, 10, time.Second)
	s.answer(1100*ms, 400*ms, 400*ms) // a slow answer: a stall, not timed out
	s.answer(1800*ms, 10*ms, 1750*ms)
	s.metricsTook(1815*ms, 1750*ms+20*time.Microsecond, 11, 1700*ms)
	if d := s.rule.For(s.n).Allowance; d != 800*ms+time.Microsecond {
		t.Errorf("allowance %v, want the 700 ms sync + the 100 ms skew", d)
	}
}

// A sync that ran across a stall left out of D still cannot confirm by
// lateness unless it started after the change: its own duration bounds
// its start. Here the stall is a network that dropped the polls from
// 1250 ms to 2250 ms while a loaded kube-proxy ran a sync from 900 ms
// (before the change, at 1 s) to 3600 ms: completed past the stall's end
// plus the catch-up plus D, it would confirm by lateness alone.
func TestWitnessStallSpanningSyncBoundsItsStart(t *testing.T) {
	s := newNodeScenario(t)
	s.answer(800*ms, 10*ms, 400*ms)
	s.metricsTook(805*ms, 400*ms, 10, time.Second)
	s.n.Failed(&PollError{Pending: true, Msg: "timed out"}, s.t0.Add(1250*ms), s.t0.Add(2250*ms))
	s.answer(2300*ms, 10*ms, 400*ms) // the polls get through again
	s.answer(3700*ms, 10*ms, 3600*ms)
	s.metricsTook(3715*ms, 3600*ms+20*time.Microsecond, 11, time.Second+2700*ms)
	if d := s.rule.For(s.n).Allowance; d != 250*ms {
		t.Errorf("allowance %v, want D: the sync ran across the stall", d)
	}
	s.expect(NodePending, "last sync may predate the change")
}

// metricsQueued is metricsTook with the family's last queued change at
// queued, the answer in after rtt.
func (s *nodeScenario) metricsQueued(at, rtt, sync time.Duration, count uint64, sum, queued time.Duration) MetricsNote {
	m := Metrics{ProcessStart: s.t0.Add(-hour),
		Synced:    map[discovery.AddressType]time.Time{discovery.AddressTypeIPv4: s.t0.Add(sync)},
		Queued:    map[discovery.AddressType]time.Time{discovery.AddressTypeIPv4: s.t0.Add(queued)},
		Durations: map[discovery.AddressType]SyncDurations{discovery.AddressTypeIPv4: {Count: count, Sum: sum.Seconds()}}}
	return s.n.RecordMetrics(m, s.t0.Add(at), s.t0.Add(at+rtt))
}

// queuedScenario: a sync from 1005 ms to 1035 ms, right after the change
// (R = 1 s): ambiguous by its completion, measured 30 ms long by the
// metrics, which show the last change queued at 1003 ms, before it began.
func queuedScenario(t *testing.T) *nodeScenario {
	s := newNodeScenario(t)
	s.answer(900*ms, 10*ms, 400*ms)
	s.metricsQueued(905*ms, 5*ms, 400*ms+20*time.Microsecond, 10, time.Second, 300*ms)
	s.answer(1100*ms, 10*ms, 1035*ms)
	s.metricsQueued(1110*ms, 5*ms, 1035*ms+20*time.Microsecond, 11, 1030*ms, 1003*ms)
	return s
}

// The sync started after the last change kube-proxy had queued, read in
// an answer sent D after the change: kube-proxy had the change by then,
// so that sync took it. Confirmed at once, not after rule 3's silence,
// and dated by the sync.
func TestWitnessQueuedBeforeTheSyncConfirms(t *testing.T) {
	s := queuedScenario(t)
	s.expect(NodePending, "may predate the change") // sent 110 ms after R: kube-proxy may not have had it
	s.answer(1300*ms, 10*ms, 1035*ms)
	s.metricsQueued(1310*ms, 5*ms, 1035*ms+20*time.Microsecond, 11, 1030*ms, 1003*ms)
	s.expect(NodeConfirmed, "")
	s.expectWitness(WitnessMetrics)
	at, ok := s.rule.SyncedBy(s.n, map[discovery.AddressType]time.Time{discovery.AddressTypeIPv4: s.r})
	if !ok || at.After(s.t0.Add(1310*ms)) || at.Before(s.t0.Add(1035*ms)) {
		t.Errorf("synced by %v (%v), want the sync's completion, dated", at.Sub(s.t0), ok)
	}
}

// Each part of the rule is needed: a change queued after the sync began
// (it may be ours, for the next sync), a sync whose duration the metrics
// did not measure, an answer held by a frozen kube-proxy, and an answer
// sent before R + D leave the sync to the silence rule.
func TestWitnessQueuedRuleNeedsEachPart(t *testing.T) {
	for _, tc := range []struct {
		name          string
		queued        time.Duration
		count         uint64
		sum           time.Duration
		sentAt, rtt   time.Duration
		wantConfirmed bool
	}{
		{"queued after the sync began", 1010 * ms, 11, 1030 * ms, 1310 * ms, 5 * ms, false},
		{"queued just after the measured start", 1006 * ms, 11, 1030 * ms, 1310 * ms, 5 * ms, false},
		{"sync not measured", 1003 * ms, 10, time.Second, 1310 * ms, 5 * ms, false},
		{"answer held 300 ms", 1003 * ms, 11, 1030 * ms, 1310 * ms, 300 * ms, false},
		{"answer sent before R + D", 1003 * ms, 11, 1030 * ms, 1240 * ms, 5 * ms, false},
		{"all parts", 1003 * ms, 11, 1030 * ms, 1310 * ms, 5 * ms, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newNodeScenario(t)
			s.answer(900*ms, 10*ms, 400*ms)
			s.metricsQueued(905*ms, 5*ms, 400*ms+20*time.Microsecond, 10, time.Second, 300*ms)
			s.answer(tc.sentAt-10*ms, 5*ms, 1035*ms)
			s.metricsQueued(tc.sentAt, tc.rtt, 1035*ms+20*time.Microsecond, tc.count, tc.sum, tc.queued)
			if tc.wantConfirmed {
				s.expect(NodeConfirmed, "")
			} else {
				s.expect(NodePending, "may predate the change")
			}
		})
	}
}

// After a stall the answer must come D past the catch-up: a kube-proxy
// that resumed has the changes it missed only then.
func TestWitnessQueuedAfterAStall(t *testing.T) {
	s := newNodeScenario(t)
	s.answer(900*ms, 10*ms, 400*ms)
	s.metricsQueued(905*ms, 5*ms, 400*ms+20*time.Microsecond, 10, time.Second, 300*ms)
	s.answer(950*ms, 400*ms, 1035*ms) // held until 1350 ms: a stall from 950 ms, caught up by 1750 ms
	s.metricsQueued(1360*ms, 5*ms, 1035*ms+20*time.Microsecond, 11, 1030*ms, 1003*ms)
	s.expect(NodePending, "")
	s.answer(1900*ms, 5*ms, 1035*ms)
	s.metricsQueued(1910*ms, 5*ms, 1035*ms+20*time.Microsecond, 11, 1030*ms, 1003*ms)
	s.expect(NodePending, "") // 1910 ms: before the catch-up + D (2000 ms)
	s.answer(2010*ms, 5*ms, 1035*ms)
	s.metricsQueued(2020*ms, 5*ms, 1035*ms+20*time.Microsecond, 11, 1030*ms, 1003*ms)
	s.expect(NodeConfirmed, "")
}

// The first instant an answer can prove a sync by the queued-change rule
// is D past the change's receipt, or after a stall D past its catch-up
// (the stall's end plus its length, at most MinSync); none is known while
// a poll is unanswered. TestWitnessQueuedAfterAStall checks the rule
// against the same instant.
func TestFirstProof(t *testing.T) {
	s := newNodeScenario(t)
	targets := map[discovery.AddressType]time.Time{discovery.AddressTypeIPv4: s.r}
	s.answer(900*ms, 10*ms, 400*ms)
	if got, want := s.rule.FirstProof(s.n, targets), s.r.Add(250*ms); !got.Equal(want) {
		t.Errorf("first proof at +%v, want R + D", got.Sub(s.t0))
	}
	s.n.Failed(&PollError{Pending: true, Msg: "accepted but did not answer within 1s"}, s.t0.Add(1100*ms), s.t0.Add(2100*ms))
	if got := s.rule.FirstProof(s.n, targets); !got.IsZero() {
		t.Errorf("first proof at +%v while a poll is unanswered, want none", got.Sub(s.t0))
	}
	s.answer(2200*ms, 10*ms, 1035*ms) // the stall: 1100 ms to 2210 ms; caught up by 3210 ms
	if got, want := s.rule.FirstProof(s.n, targets), s.t0.Add(3460*ms); !got.Equal(want) {
		t.Errorf("first proof at +%v after the stall, want +%v: D past its catch-up", got.Sub(s.t0), want.Sub(s.t0))
	}
}
