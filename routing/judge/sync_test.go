package judge

import (
	"strings"
	"testing"
	"time"

	discovery "k8s.io/api/discovery/v1"
)

// node is a kube-proxy seen from a clock that starts at t0: its syncs and
// answers are given as offsets, and its clock is ours.
type nodeScenario struct {
	t    *testing.T
	t0   time.Time
	rule Rule
	n    *Node
	r    time.Time // receipt of the change it must hold
	// fresh: the next answer comes on a new connection (answer).
	fresh bool
}

func newNodeScenario(t *testing.T) *nodeScenario {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	return &nodeScenario{t: t, t0: t0, n: NewNode("n1", "10.0.0.1:10256"),
		rule: Rule{MinSync: time.Second, Allowance: 250 * time.Millisecond, Lag: 100 * time.Millisecond},
		r:    t0.Add(time.Second)}
}

// answer: kube-proxy answered a request sent at `at` after rtt, its last
// IPv4 sync completed at `sync`; on the connection that answered before,
// if any, unless fresh is set (then on a new one, once).
func (s *nodeScenario) answer(at, rtt, sync time.Duration) {
	kept := s.n.Answered() && !s.fresh
	s.fresh = false
	sent := s.t0.Add(at)
	received := sent.Add(rtt)
	h := Healthz{CurrentTime: sent.Add(rtt / 2), Families: map[discovery.AddressType]FamilyHealth{
		discovery.AddressTypeIPv4: {LastUpdated: s.t0.Add(sync), Healthy: true}}}
	s.n.Record(h, sent, received, s.rule.Allowance, kept)
}

func (s *nodeScenario) expect(want NodeVerdict, why string) {
	s.t.Helper()
	v, w := s.rule.Node(s.n, map[discovery.AddressType]time.Time{discovery.AddressTypeIPv4: s.r})
	if v != want || !strings.Contains(w, why) {
		s.t.Errorf("verdict %d (%q), want %d with %q", v, w, want, why)
	}
}

const ms = time.Millisecond

// A sync that completed D after the change's receipt holds it.
func TestNodeSyncAfterTheChange(t *testing.T) {
	s := newNodeScenario(t)
	s.answer(1100*ms, 10*ms, 900*ms) // the last sync predates the change
	s.expect(NodePending, "no sync since the change")
	s.answer(1500*ms, 10*ms, 1300*ms) // completed 300 ms after: > D
	s.expect(NodeConfirmed, "")
}

// A sync that completed just after receipt may be an in-flight one that
// lacks the change: it confirms only once kube-proxy provably ran
// minSyncPeriod + D past it without another.
func TestNodeInFlightSyncNeedsSilence(t *testing.T) {
	s := newNodeScenario(t)
	s.answer(1100*ms, 10*ms, 1050*ms)
	s.expect(NodePending, "last sync may predate the change")
	s.answer(1800*ms, 10*ms, 1050*ms)
	s.expect(NodePending, "last sync may predate the change")
	s.answer(2500*ms, 10*ms, 1050*ms)
	s.expect(NodePending, "(755ms so far)")
	s.answer(2800*ms, 10*ms, 1050*ms) // the answer of age 1.455 s followed by one 300 ms later
	s.expect(NodeConfirmed, "")
}

// A slow answer proves nothing of kube-proxy running: a frozen one answers
// its backlog when it resumes, before its sync loop runs.
func TestNodeSlowAnswersAreNoSilence(t *testing.T) {
	s := newNodeScenario(t)
	s.answer(1100*ms, 10*ms, 1050*ms)
	s.answer(2500*ms, 900*ms, 1050*ms)
	s.expect(NodePending, "last sync may predate the change")
}

// After a failed poll, a new lastUpdated may be a restarted kube-proxy's
// start stamp, not a sync.
func TestNodeRestartStamp(t *testing.T) {
	s := newNodeScenario(t)
	s.answer(1100*ms, 10*ms, 900*ms)
	if !s.n.Failed(&PollError{Msg: "refused"}, s.t0.Add(1200*ms), s.t0.Add(1210*ms)) {
		t.Error("a first failure is a change")
	}
	s.fresh = true // the restarted instance has none of the old connections
	s.answer(2000*ms, 10*ms, 1900*ms)
	s.expect(NodePending, "restarted kube-proxy's start")
	s.answer(3000*ms, 10*ms, 2900*ms) // a later lastUpdated is a sync
	s.expect(NodeConfirmed, "")
}

// A first answer, on a new connection, whose lastUpdated is late enough to
// confirm: a kube-proxy restarted after the change and before that
// connection was made stamps lastUpdated at its start, before its first
// sync, while the old instance's rules still pick the pod; no failed poll
// or lost connection tells. Only a later lastUpdated on the same connection
// is a sync. An earlier lastUpdated is judged as any sync (it cannot
// confirm by being late).
func TestNodeFirstAnswerAfterTheChange(t *testing.T) {
	s := newNodeScenario(t)
	s.answer(1500*ms, 10*ms, 1400*ms) // R+400ms: ≥ R+D
	s.expect(NodePending, "first seen on a new connection, after the change")
	s.answer(1700*ms, 10*ms, 1400*ms) // the same stamp again proves nothing more
	s.expect(NodePending, "first seen on a new connection, after the change")
	s.answer(4000*ms, 10*ms, 3900*ms) // its first sync, on the same connection
	s.expect(NodeConfirmed, "")

	// With a baseline before the change, the same late lastUpdated is new
	// on a connection that answered before: a sync.
	s = newNodeScenario(t)
	s.answer(900*ms, 10*ms, 500*ms)
	s.expect(NodePending, "no sync since the change")
	s.answer(1500*ms, 10*ms, 1400*ms)
	s.expect(NodeConfirmed, "")
}

// A node that accepted and never answered is pending; one that refused is
// unverified; one without an address cannot be asked.
func TestNodePollFailures(t *testing.T) {
	s := newNodeScenario(t)
	s.n.Failed(&PollError{Pending: true, Msg: "accepted but did not answer"}, s.t0, s.t0.Add(time.Second))
	s.expect(NodePending, "did not answer")
	s = newNodeScenario(t)
	s.n.Failed(&PollError{Msg: "unreachable"}, s.t0, s.t0)
	s.expect(NodeUnverified, "unreachable")
	s = newNodeScenario(t)
	s.n = NewNode("n2", "")
	s.expect(NodeUnverified, "no InternalIP")
}

// Two polls of one sync far apart: the node's clock was stepped.
func TestNodeClockStep(t *testing.T) {
	s := newNodeScenario(t)
	s.answer(1100*ms, 10*ms, 1050*ms)
	sent := s.t0.Add(2000 * ms)
	// The node's clock went back a second: the same sync looks recent.
	h := Healthz{CurrentTime: sent.Add(5*ms - time.Second), Families: map[discovery.AddressType]FamilyHealth{
		discovery.AddressTypeIPv4: {LastUpdated: s.t0.Add(1050 * ms), Healthy: true}}}
	s.n.Record(h, sent, sent.Add(10*ms), s.rule.Allowance, false)
	s.expect(NodePending, "clock was stepped")
}

// A poll that timed out (kube-proxy frozen), then one sent while it was
// still frozen and answered quickly once it resumed: the answer shows the
// first sync after the resume, which its metrics hold as a sync. That sync
// may have run before the resumed informer delivered the change: the
// stall lasts until that answer, and the sync is judged against its end
// and the catch-up after it.
func TestStallLastsUntilTheNextAnswer(t *testing.T) {
	s := newNodeScenario(t)
	s.answer(900*ms, 10*ms, -5*time.Second)                                                       // the baseline
	s.n.Failed(&PollError{Pending: true, Msg: "timed out"}, s.t0.Add(1100*ms), s.t0.Add(2100*ms)) // frozen from before R+100ms
	s.fresh = true
	s.answer(2400*ms, 150*ms, 2530*ms) // sent frozen, answered at the resume, R+1.53s: quick
	s.metrics(2560*ms, -hour, 2530*ms+20*time.Microsecond, -1)
	s.expect(NodePending, "may predate the change")
	s.answer(2900*ms, 10*ms, 2880*ms) // the next sync: it may still lack the change
	s.expect(NodePending, "may predate the change")
	// The stall lasted 1.45 s: the resumed kube-proxy may take a
	// minSyncPeriod to read what it missed, so a sync confirms by being
	// late only from R+2.55s + 1s + D.
	s.answer(3850*ms, 10*ms, 3830*ms)
	s.expect(NodeConfirmed, "")
}

// A restarted kube-proxy answers without per-family status until its sync
// loop starts, then, on the same connection, with the loop's start stamp,
// while the rules of the instance before it still pick the pod: an answer
// that told nothing does not make the next stamp a sync.
func TestStampAfterAnAnswerWithoutStatusIsNoSync(t *testing.T) {
	s := newNodeScenario(t)
	s.answer(900*ms, 10*ms, -5*time.Second) // the baseline, the old instance
	s.n.Failed(&PollError{Msg: "refused"}, s.t0.Add(1100*ms), s.t0.Add(1101*ms))
	// The new instance answers on a new connection, without status; the
	// client keeps that connection for the next answer.
	s.n.Failed(&PollError{Msg: "no per-family status", Proxy: ProxyKubeProxyOld}, s.t0.Add(1500*ms), s.t0.Add(1502*ms))
	s.answer(1700*ms, 2*ms, 1600*ms) // on that kept connection
	s.expect(NodePending, "may be a restarted kube-proxy's start")
	s.answer(2900*ms, 2*ms, 2800*ms) // a later stamp on that connection: a sync
	s.expect(NodeConfirmed, "")
}

// Silence across a stall. kube-proxy's sync at R+80ms lacks the change
// (it reaches kube-proxy at R+100ms), and kube-proxy is frozen from
// R+90ms to R+2.09s: the poll sent at R+200ms times out, its answer is
// read at R+2.1s. The resumed informer delivers the change over the
// catch-up, up to min(stall, MinSync) = 1 s after the resume (R+3.09s),
// and the sync that holds it comes then. Two quick answers D apart right
// after the resume show the R+80ms sync 2 s old: kube-proxy did not run
// for most of those 2 s, so they prove no silence.
func TestNodeSilenceAcrossAStall(t *testing.T) {
	s := newNodeScenario(t) // R = t0+1s
	rec := func(sent, served, received time.Duration) {
		h := Healthz{CurrentTime: s.t0.Add(served), Families: map[discovery.AddressType]FamilyHealth{
			discovery.AddressTypeIPv4: {LastUpdated: s.t0.Add(1080 * ms), Healthy: true}}}
		s.n.Record(h, s.t0.Add(sent), s.t0.Add(received), s.rule.Allowance, true)
	}
	s.answer(500*ms, 10*ms, -4*time.Second) // the baseline: last sync R-5s
	s.n.Failed(&PollError{Pending: true, Msg: "accepted but did not answer within 1s"}, s.t0.Add(1200*ms), s.t0.Add(2200*ms))
	rec(1200*ms, 3090*ms, 3100*ms) // the held answer, served at the resume
	rec(3100*ms, 3105*ms, 3110*ms) // quick, 2.025 s after the sync
	s.expect(NodePending, "may predate the change")
	rec(3360*ms, 3365*ms, 3370*ms) // quick, D later
	s.expect(NodePending, "may predate the change")
}

// A confirmed node dates its confirmation by the latest completion of the
// sync judged (received − age), whether lateness or silence confirmed it;
// a pending node has no date.
func TestNodeSyncedBy(t *testing.T) {
	targets := func(s *nodeScenario) map[discovery.AddressType]time.Time {
		return map[discovery.AddressType]time.Time{discovery.AddressTypeIPv4: s.r}
	}
	s := newNodeScenario(t)
	s.answer(1100*ms, 10*ms, 900*ms)
	if _, ok := s.rule.SyncedBy(s.n, targets(s)); ok {
		t.Fatal("a pending node is dated")
	}
	s.answer(1500*ms, 10*ms, 1300*ms) // age 205 ms, received at 1510 ms
	if by, ok := s.rule.SyncedBy(s.n, targets(s)); !ok || !by.Equal(s.t0.Add(1305*ms)) {
		t.Fatalf("confirmed by lateness: SyncedBy %v %v, want 1.305s", by.Sub(s.t0), ok)
	}

	s = newNodeScenario(t)
	for _, at := range []time.Duration{1100 * ms, 1800 * ms, 2500 * ms, 2800 * ms} {
		s.answer(at, 10*ms, 1050*ms)
	}
	if by, ok := s.rule.SyncedBy(s.n, targets(s)); !ok || !by.Equal(s.t0.Add(1055*ms)) {
		t.Fatalf("confirmed by silence: SyncedBy %v %v, want 1.055s", by.Sub(s.t0), ok)
	}
}

// AwaitsStamp: a node that answered with stamps, then was refused, told
// nothing (as a kube-proxy starting answers) or reconnected, awaits the
// next stamp; not before any stamped answer, not after a stamped one, not
// after a poll that timed out, nor where an emulation answers.
func TestNodeAwaitsStamp(t *testing.T) {
	at := func(d time.Duration) time.Time { return time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC).Add(d) }
	for _, c := range []struct {
		name string
		then func(s *nodeScenario)
		want bool
	}{
		{"stamped", func(*nodeScenario) {}, false},
		{"refused", func(s *nodeScenario) { s.n.Failed(&PollError{Msg: "refused"}, at(2*time.Second), at(2*time.Second)) }, true},
		{"told nothing", func(s *nodeScenario) {
			s.n.Failed(&PollError{Msg: "no per-family status", Proxy: ProxyKubeProxyOld}, at(2*time.Second), at(2*time.Second))
		}, true},
		{"reconnected", func(s *nodeScenario) { s.n.Reconnected() }, true},
		{"timed out", func(s *nodeScenario) {
			s.n.Failed(&PollError{Msg: "accepted but did not answer", Pending: true}, at(2*time.Second), at(3*time.Second))
		}, false},
		{"emulated", func(s *nodeScenario) {
			s.n.Failed(&PollError{Msg: "answers as Cilium", Proxy: ProxyEmulated}, at(2*time.Second), at(2*time.Second))
		}, false},
		{"refused, then stamped", func(s *nodeScenario) {
			s.n.Failed(&PollError{Msg: "refused"}, at(2*time.Second), at(2*time.Second))
			s.fresh = true
			s.answer(2100*ms, 5*ms, 2050*ms)
		}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newNodeScenario(t)
			if s.n.AwaitsStamp() {
				t.Fatal("a node never answered awaits a stamp")
			}
			s.answer(1100*ms, 10*ms, 900*ms)
			c.then(s)
			if got := s.n.AwaitsStamp(); got != c.want {
				t.Errorf("AwaitsStamp() = %v, want %v", got, c.want)
			}
		})
	}
}
