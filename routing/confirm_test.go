package routing

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/hapsuper/hapsuper/drain"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	testingclock "k8s.io/utils/clock/testing"
)

// fakeProxy is one node's kube-proxy healthz on the observer's fake clock.
// Its syncs complete at the given instants of our clock; its own clock is
// ours plus skew. A request takes toNode of fake time before the node reads
// its clock and fromNode after, so tests choose the round trip and where in
// it the node's reading falls.
type fakeProxy struct {
	clk *testingclock.FakeClock

	mu               sync.Mutex
	skew             time.Duration
	syncs            []time.Time // completions, our clock, ascending
	toNode, fromNode time.Duration
	// At stepAt (our clock) the node's clock is stepped by step.
	stepAt   time.Time
	step     time.Duration
	hang     bool   // accept and never answer, until the client gives up
	body     string // a fixed answer instead
	requests int
	gaveUp   int // hung requests the client gave up on
	served   int // answers with a sync written
}

func (p *fakeProxy) requestCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.requests
}

func (p *fakeProxy) hung() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.hang
}

func (p *fakeProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	p.requests++
	p.mu.Unlock()
	// A hung kube-proxy (frozen, or its packets dropped) answers what it
	// was asked once it runs again, unless the client gave up.
	for p.hung() {
		select {
		case <-r.Context().Done():
			p.mu.Lock()
			p.gaveUp++
			p.mu.Unlock()
			return
		case <-time.After(2 * time.Millisecond):
		}
	}
	p.mu.Lock()
	body, toNode, fromNode, skew, stepAt, step := p.body, p.toNode, p.fromNode, p.skew, p.stepAt, p.step
	syncs := append([]time.Time(nil), p.syncs...)
	p.mu.Unlock()
	if body != "" {
		fmt.Fprint(w, body)
		return
	}
	p.clk.Step(toNode)
	now := p.clk.Now()
	var last time.Time
	for _, s := range syncs {
		if !s.After(now) {
			last = s
		}
	}
	stamp := func(t time.Time) string {
		if !stepAt.IsZero() && !t.Before(stepAt) {
			t = t.Add(step)
		}
		return t.Add(skew).UTC().Format(time.RFC3339Nano)
	}
	if last.IsZero() { // no sync yet: kube-proxy omits the status
		fmt.Fprintf(w, `{"lastUpdated":"0001-01-01T00:00:00Z","currentTime":%q,"nodeEligible":true,"healthy":true}`, stamp(now))
		p.clk.Step(fromNode)
		return
	}
	fmt.Fprintf(w, `{"lastUpdated":%q,"currentTime":%q,"nodeEligible":true,"healthy":true,"status":{"IPv4":{"lastUpdated":%q,"healthy":true}}}`,
		stamp(now), stamp(now), stamp(last))
	p.clk.Step(fromNode)
	p.mu.Lock()
	p.served++
	p.mu.Unlock()
}

func (p *fakeProxy) set(edit func(p *fakeProxy)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	edit(p)
}

// scenario is a drain of web-0 seen by one observer and the kube-proxies of
// the nodes it names. R is the receipt of the withdrawal.
type scenario struct {
	*testObserver
	t       *testing.T
	proxies map[string]*fakeProxy
	servers map[string]*httptest.Server // each node's kube-proxy healthz
	metrics map[string]*fakeMetrics     // each node's kube-proxy metrics, with cfg.MetricsPort
	R       time.Time
	again   bool // the last round's (runRounds): the next wanted at once
}

// newScenario: node n2 (10.0.0.2) runs a kube-proxy whose last sync before
// the change was 5 s earlier; at R, 10 s after the start, the watch sees
// web-0's deletion (a baseline round asks every node once), then web-0 is
// withdrawn (its peer is ready) and the stop is requested.
func newScenario(t *testing.T, cfg Config, nodes ...string) *scenario {
	t.Helper()
	return startScenario(t, cfg, true, nodes...)
}

// newLateScenario is newScenario without the baseline: the watch saw
// neither the pod's deletion nor the stop request before the withdrawal
// (a kubelet late to stop the pod), so the first poll of each node comes
// after it.
func newLateScenario(t *testing.T, cfg Config, nodes ...string) *scenario {
	t.Helper()
	return startScenario(t, cfg, false, nodes...)
}

func startScenario(t *testing.T, cfg Config, baseline bool, nodes ...string) *scenario {
	t.Helper()
	if len(nodes) == 0 {
		nodes = []string{"n2"}
	}
	client := fake.NewClientset()
	for i, name := range nodes {
		if err := client.Tracker().Add(node(name, fmt.Sprintf("10.0.0.%d", i+2))); err != nil {
			t.Fatal(err)
		}
	}
	cfg.Mode = ModeKubeProxy
	if cfg.Concurrency == 0 {
		cfg.Concurrency = 1 // the proxies step one shared clock
	}
	s := &scenario{testObserver: newTestObserver(t, cfg, client), t: t, proxies: map[string]*fakeProxy{}, servers: map[string]*httptest.Server{},
		metrics: map[string]*fakeMetrics{}}
	for i, name := range nodes {
		p := &fakeProxy{clk: s.clk, syncs: []time.Time{t0.Add(5 * time.Second)}}
		srv := httptest.NewServer(p)
		t.Cleanup(srv.Close)
		s.proxies[name] = p
		s.servers[name] = srv
		s.routes[fmt.Sprintf("10.0.0.%d:10256", i+2)] = srv.Listener.Addr().String()
		if cfg.MetricsPort != 0 {
			// Up before the baseline: a port that refuses it is not asked again.
			m := &fakeMetrics{p: p, start: t0.Add(-time.Hour)}
			msrv := httptest.NewServer(m)
			t.Cleanup(msrv.Close)
			s.metrics[name] = m
			s.routes[fmt.Sprintf("10.0.0.%d:%d", i+2, cfg.MetricsPort)] = msrv.Listener.Addr().String()
		}
	}
	s.apply(service("web"), v4("web-a", "web", mine(readyC), peer("n2", readyC)))
	s.clk.Step(10 * time.Second)
	s.R = s.clk.Now()
	if baseline {
		deleted := metav1.NewTime(s.R)
		s.apply(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: s.cfg.Identity.PodName, Namespace: s.cfg.Identity.Namespace, DeletionTimestamp: &deleted}})
		s.confirmRound(t.Context())
		if d := s.clk.Now().Sub(s.R); d != 0 {
			s.R = s.clk.Now() // the baseline's requests took fake time
		}
	}
	s.apply(v4("web-a", "web", mine(servingTermC), peer("n2", readyC)))
	s.StopRequested(s.R)
	return s
}

// syncsAt sets a node's sync completions, as offsets from R.
func (s *scenario) syncsAt(name string, offsets ...time.Duration) {
	s.proxies[name].set(func(p *fakeProxy) {
		p.syncs = nil
		for _, off := range offsets {
			p.syncs = append(p.syncs, s.R.Add(off))
		}
	})
}

// round moves the clock to R+off (unless a request already took it past)
// and runs one healthz round.
func (s *scenario) round(off time.Duration) drain.Routing {
	if d := s.R.Add(off).Sub(s.clk.Now()); d > 0 {
		s.clk.Step(d)
	}
	s.confirmRound(s.t.Context())
	return s.Routing(s.clk.Now())
}

// firstWithdrawn polls every step from R+from to R+to and returns the
// offset of the first round that says withdrawn, or -1.
func (s *scenario) firstWithdrawn(from, to, step time.Duration) time.Duration {
	for off := from; off <= to; off += step {
		if got := s.round(off); got.State == drain.RoutingWithdrawn {
			s.t.Logf("withdrawn at R+%v: %s", off, got.Detail())
			return off
		}
	}
	return -1
}

func between(t *testing.T, what string, got, lo, hi time.Duration) {
	t.Helper()
	if got < lo || got > hi {
		t.Fatalf("%s at R+%v, want within [R+%v, R+%v]", what, got, lo, hi)
	}
}

// A plain delete: kube-proxy's withdrawal sync completes 30 ms after our
// receipt. That is within D of R, so ambiguous: confirmed once two quick
// answers, D apart, the first MinSyncPeriod + D (1.25 s) after the sync,
// show no newer one: R+30ms+1.25s+0.25s = R+1.53s, the next 50 ms step.
func TestConfirmPlainDelete(t *testing.T) {
	for _, skew := range []time.Duration{0, 5 * time.Second, -5 * time.Second} {
		t.Run(fmt.Sprintf("skew %v", skew), func(t *testing.T) {
			s := newScenario(t, Config{})
			s.proxies["n2"].set(func(p *fakeProxy) { p.skew = skew })
			s.syncsAt("n2", -5*time.Second, 30*ms)
			between(t, "confirmed", s.firstWithdrawn(0, 3*time.Second, 50*ms), 1530*ms, 1550*ms)
		})
	}
}

// A first look long after the change confirms at the first answer D after
// it: one answer alone may come from a kube-proxy that just resumed.
func TestConfirmLateFirstLook(t *testing.T) {
	s := newScenario(t, Config{})
	s.syncsAt("n2", -5*time.Second, 30*ms)
	between(t, "confirmed", s.firstWithdrawn(2*time.Second, 3*time.Second, 50*ms), 2250*ms, 2250*ms)
}

// kube-proxy frozen (SIGSTOP) with the withdrawal still to sync: our
// requests wait in its listen backlog and are answered the instant it
// resumes, before its sync loop runs, showing the old sync with a large
// age. Those answers are slow; they must not confirm. Once it resumes, its
// first sync runs before it has read the watch events it missed (measured
// through real kube-proxy: confirmed on it, the node kept routing to the
// pod for another second): only a sync at least D after the node was last
// seen stalled, or silence after it, confirms.
func TestConfirmFrozenKubeProxyBacklog(t *testing.T) {
	s := newScenario(t, Config{})
	// In-flight sync without the change; frozen until R+4s; a stale sync
	// right after the thaw; the real one a minSyncPeriod later.
	s.syncsAt("n2", 5*ms, 4015*ms, 5015*ms)
	// Frozen from R+0.1s to R+4s: each answer comes back slow (held in the
	// backlog; here 400 ms, beyond quickAnswer), showing the stale sync.
	s.proxies["n2"].set(func(p *fakeProxy) { p.toNode, p.fromNode = 0, 400*ms })
	for off := 100 * ms; off < 4*time.Second; off += 500 * ms {
		if got := s.round(off); got.State == drain.RoutingWithdrawn {
			t.Fatalf("confirmed at R+%v from answers a frozen kube-proxy held: %s", off, got.Detail())
		}
	}
	s.proxies["n2"].set(func(p *fakeProxy) { p.toNode, p.fromNode = 0, 0 })
	between(t, "confirmed", s.firstWithdrawn(4050*ms, 7*time.Second, 50*ms), 5050*ms, 5050*ms)
}

// The in-flight sync seen through a slow answer: the node reads its clock
// 5 ms into an 805 ms round trip. The midpoint puts the sync at R+402 ms,
// past D; its lower bound, R+0, does not: still ambiguous, still waiting.
// A slow answer also counts as a stall (a frozen kube-proxy answers late):
// the real sync at R+1.005 s is within D of it, so silence decides, 1.5 s
// after that sync.
func TestConfirmRTTJitter(t *testing.T) {
	s := newScenario(t, Config{})
	s.syncsAt("n2", 5*ms, 1005*ms)
	s.proxies["n2"].set(func(p *fakeProxy) { p.toNode, p.fromNode = 5*ms, 800*ms })
	if got := s.round(100 * ms); got.State != drain.RoutingPending {
		t.Fatalf("slow answer about the in-flight sync: %s (%s)", got.State, got.Detail())
	}
	s.proxies["n2"].set(func(p *fakeProxy) { p.toNode, p.fromNode = 0, 0 })
	between(t, "confirmed", s.firstWithdrawn(950*ms, 3*time.Second, 50*ms), 2500*ms, 2550*ms)
}

// The ambiguous sync held the change (no newer sync follows): confirmed
// after MinSyncPeriod + D of silence proved by two quick answers D apart,
// not before.
func TestConfirmAmbiguousThenSilence(t *testing.T) {
	s := newScenario(t, Config{})
	s.syncsAt("n2", -5*time.Second, 5*ms)
	between(t, "confirmed", s.firstWithdrawn(0, 3*time.Second, 10*ms), 1505*ms, 1510*ms)
}

// A lagging watcher: kube-proxy had the change first and synced 30 ms
// before our receipt. Within WatchLag: ambiguous, confirmed after the wait.
// Beyond it (150 ms before), "no sync since the change" until the bound.
func TestConfirmLaggingWatcher(t *testing.T) {
	s := newScenario(t, Config{})
	s.syncsAt("n2", -5*time.Second, -30*ms)
	between(t, "confirmed", s.firstWithdrawn(0, 3*time.Second, 10*ms), 1470*ms, 1480*ms)

	s = newScenario(t, Config{})
	s.syncsAt("n2", -5*time.Second, -150*ms)
	if off := s.firstWithdrawn(0, 5*time.Second, 100*ms); off >= 0 {
		t.Fatalf("a sync 150 ms before receipt confirmed at R+%v", off)
	}
	expect(t, s.Routing(s.clk.Now()), drain.RoutingPending, "n2: IPv4: no sync since the change")
}

// Partitioned from the API server, kube-proxy answers healthy:true with a
// frozen lastUpdated for minutes: never confirmed.
func TestConfirmPartitioned(t *testing.T) {
	s := newScenario(t, Config{})
	s.syncsAt("n2", -20*time.Second)
	if off := s.firstWithdrawn(0, 70*time.Second, 500*ms); off >= 0 {
		t.Fatalf("partitioned node confirmed at R+%v", off)
	}
	expect(t, s.Routing(s.clk.Now()), drain.RoutingPending, "kube-proxy not confirmed on 1 of 1 nodes", "n2: IPv4: no sync since the change")
}

// SIGSTOPped kube-proxy: the kernel accepts, nothing answers. Pending,
// each request bounded by RequestTimeout.
func TestConfirmFrozenNode(t *testing.T) {
	// A request timeout with room for a loaded machine: the answer owed
	// after the wake-up must arrive within it.
	s := newLateScenario(t, Config{RequestTimeout: time.Second})
	s.proxies["n2"].set(func(p *fakeProxy) { p.hang = true })
	start := time.Now()
	got := s.round(2 * time.Second)
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("round took %v with a 1s request timeout", el)
	}
	expect(t, got, drain.RoutingPending, "n2: healthz at 10.0.0.2:10256 accepted but did not answer within 1s")

	// It wakes up and syncs at once, before reading the watch it missed:
	// not proof (and, first seen after a failed poll, possibly a restarted
	// kube-proxy's start stamp). The sync after it, a minSyncPeriod later, is.
	// The node's syncs and the clock are set before it wakes, so that the
	// answer it still owes is written at R+2.2s whatever the scheduling.
	s.syncsAt("n2", 2100*ms, 3100*ms)
	s.clk.Step(s.R.Add(2200 * ms).Sub(s.clk.Now()))
	s.proxies["n2"].set(func(p *fakeProxy) { p.hang = false })
	expect(t, s.round(2200*ms), drain.RoutingPending, "waiting for a later one")
	expect(t, s.round(3200*ms), drain.RoutingWithdrawn)
}

// No kube-proxy behind the port (a replacement, or none): that node is
// unverified and named; the others are still awaited and confirmed.
func TestConfirmPortClosed(t *testing.T) {
	s := newLateScenario(t, Config{}, "n2", "n3")
	delete(s.routes, "10.0.0.3:10256")
	s.syncsAt("n2", -5*time.Second, 1100*ms)
	expect(t, s.round(500*ms), drain.RoutingPending, "n2: IPv4: no sync since the change")
	expect(t, s.round(1200*ms), drain.RoutingUnverified,
		"kube-proxy not observed on 1 of 2 nodes: n3: healthz at 10.0.0.3:10256 unreachable", "confirmed on the others")
}

// Answers that are not a kube-proxy ≥ 1.33 healthz leave the node
// unverified; a family reported unhealthy leaves it pending.
func TestConfirmOddAnswers(t *testing.T) {
	tests := []struct {
		name, body string
		state      drain.RoutingState
		detail     string
	}{
		{"pre-1.33", `{"lastUpdated":"2026-03-02T10:00:10.5Z","currentTime":"2026-03-02T10:00:10.5Z","nodeEligible":true}`,
			drain.RoutingUnverified, "no per-family status"},
		{"html", `<html>nope</html>`, drain.RoutingUnverified, "not kube-proxy healthz"},
		{"no IPv6 status for an IPv6 pod", "", drain.RoutingUnverified, "healthz has no IPv6 status"},
		{"unhealthy", `{"currentTime":"2026-03-02T10:00:12Z","healthy":false,"status":{"IPv4":{"lastUpdated":"2026-03-02T10:00:11Z","healthy":false}}}`,
			drain.RoutingPending, "unsynced for longer than its healthz timeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := newLateScenario // a node that always answers so
			if tt.body == "" {
				start = newScenario
			}
			s := start(t, Config{})
			s.syncsAt("n2", 500*ms)
			s.proxies["n2"].set(func(p *fakeProxy) { p.body = tt.body })
			if tt.body == "" {
				s.apply(v6("web-a6", "web", mine6(servingTermC), peer6("n2", readyC)))
			}
			expect(t, s.round(2*time.Second), tt.state, tt.detail)
		})
	}
}

// Once confirmed, a node is not asked again; when the API verdict turns
// pending and back, R moves and the node must confirm the new change.
func TestConfirmStopsPollingAndRestartsOnNewR(t *testing.T) {
	s := newScenario(t, Config{})
	s.syncsAt("n2", 30*ms)
	s.round(2 * time.Second)
	expect(t, s.round(2300*ms), drain.RoutingWithdrawn)
	n := s.proxies["n2"].requests
	s.round(2500 * ms)
	if s.proxies["n2"].requests != n {
		t.Fatal("a confirmed node was polled again")
	}

	// The peer goes unready (kube-proxy falls back to web-0), then ready.
	s.clk.Step(time.Second)
	s.apply(v4("web-a", "web", mine(servingTermC), peer("n2", servingTermC)))
	expect(t, s.Routing(s.clk.Now()), drain.RoutingPending, "falls back")
	s.clk.Step(time.Second)
	r2 := s.clk.Now()
	s.apply(v4("web-a", "web", mine(servingTermC), peer("n2", readyC)))
	got := s.round(r2.Sub(s.R))
	expect(t, got, drain.RoutingPending, "no sync since the change")

	s.syncsAt("n2", 30*ms, r2.Sub(s.R)+300*ms)
	expect(t, s.round(r2.Sub(s.R)+400*ms), drain.RoutingWithdrawn)
}

// Requests in flight never exceed Concurrency.
func TestConfirmConcurrency(t *testing.T) {
	names := make([]string, 12)
	for i := range names {
		names[i] = fmt.Sprintf("n%02d", i+2)
	}
	s := newLateScenario(t, Config{Concurrency: 3}, names...)
	var mu sync.Mutex
	inFlight, most := 0, 0
	gate := make(chan struct{})
	for addr := range s.routes {
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			inFlight++
			most = max(most, inFlight)
			mu.Unlock()
			select {
			case <-gate:
			case <-time.After(20 * ms): // lets requests overlap; the bound holds either way
			}
			mu.Lock()
			inFlight--
			mu.Unlock()
			fmt.Fprint(w, `{"currentTime":"2026-03-02T10:00:12Z","status":{"IPv4":{"lastUpdated":"2026-03-02T09:00:11Z","healthy":true}}}`)
		})
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		s.routes[addr] = srv.Listener.Addr().String()
	}
	expect(t, s.round(time.Second), drain.RoutingPending, "kube-proxy not confirmed on 12 of 12 nodes", "and 7 more")
	close(gate)
	if most > 3 || most < 1 {
		t.Fatalf("%d requests in flight, concurrency 3", most)
	}
}

// A node that answered before the change and then stopped answering (its
// kube-proxy killed) stays pending on what it said, and the detail says
// that its healthz no longer answers.
func TestConfirmKubeProxyGoneAfterAnswer(t *testing.T) {
	s := newScenario(t, Config{}, "n2")
	s.syncsAt("n2", -5*time.Second)
	expect(t, s.round(300*ms), drain.RoutingPending, "n2: IPv4: no sync since the change")
	s.servers["n2"].Close() // ends the kept-alive connection too
	expect(t, s.round(1500*ms), drain.RoutingPending,
		"n2: IPv4: no sync since the change", "last poll failed: healthz at 10.0.0.2:10256 unreachable")
}

// kube-proxy restarted during the drain (killed at R+0.5s, back at
// R+1.3s): its sync loop stamps lastUpdated when it starts, before its
// first sync, while the dead instance's rules still pick the pod. The
// stamp, first seen after a refused poll, must not confirm: the sync after
// it (R+1.8s) does.
func TestConfirmRestartStamp(t *testing.T) {
	s := newScenario(t, Config{})
	s.syncsAt("n2", -5*time.Second)
	expect(t, s.round(100*ms), drain.RoutingPending, "no sync since the change")
	addr := s.routes["10.0.0.2:10256"]
	delete(s.routes, "10.0.0.2:10256") // killed: the port refuses
	s.http.CloseIdleConnections()
	expect(t, s.round(600*ms), drain.RoutingPending, "last poll failed")
	s.routes["10.0.0.2:10256"] = addr
	s.syncsAt("n2", -5*time.Second, 1300*ms) // the new instance's start stamp
	for _, off := range []time.Duration{1400 * ms, 1600 * ms} {
		expect(t, s.round(off), drain.RoutingPending, "may be a restarted kube-proxy's start, not a sync")
	}
	s.syncsAt("n2", -5*time.Second, 1300*ms, 1800*ms) // its first sync
	expect(t, s.round(1900*ms), drain.RoutingWithdrawn)
}

// A poll that failed once without a restart (the same lastUpdated before
// and after) leaves what the node said standing.
func TestConfirmTransientFailure(t *testing.T) {
	s := newScenario(t, Config{})
	s.syncsAt("n2", 30*ms)
	expect(t, s.round(100*ms), drain.RoutingPending, "last sync may predate the change")
	addr := s.routes["10.0.0.2:10256"]
	delete(s.routes, "10.0.0.2:10256")
	s.http.CloseIdleConnections()
	expect(t, s.round(400*ms), drain.RoutingPending, "last poll failed: healthz at 10.0.0.2:10256 unreachable")
	s.routes["10.0.0.2:10256"] = addr
	between(t, "confirmed", s.firstWithdrawn(500*ms, 3*time.Second, 50*ms), 1550*ms, 1550*ms)
}

// One slow answer (hapsuper throttled, 400 ms round trip) about a sync that
// already held the change (completed at R+300ms, past D) stalls only the
// syncs that can have completed after the slow request was sent: once a
// quick answer places the sync before it, the node is confirmed, instead
// of waiting for kube-proxy's next sync.
func TestConfirmSlowAnswerAfterSync(t *testing.T) {
	s := newScenario(t, Config{})
	s.syncsAt("n2", 300*ms)
	s.proxies["n2"].set(func(p *fakeProxy) { p.toNode, p.fromNode = 0, 400*ms })
	if got := s.round(400 * ms); got.State == drain.RoutingWithdrawn {
		t.Fatalf("confirmed on a slow answer alone: %s", got.Detail())
	}
	s.proxies["n2"].set(func(p *fakeProxy) { p.toNode, p.fromNode = 0, 0 })
	expect(t, s.round(1000*ms), drain.RoutingWithdrawn)
}

// The node's clock is stepped back 1 s between two polls of the same
// ambiguous sync (completed R+5ms): the second poll's age puts the sync at
// R+1.005s, past D. The polls disagree by a second: neither is trusted,
// and only a newer sync confirms.
func TestConfirmClockStep(t *testing.T) {
	s := newScenario(t, Config{})
	s.syncsAt("n2", -5*time.Second, 5*ms)
	expect(t, s.round(100*ms), drain.RoutingPending, "last sync may predate the change")
	s.proxies["n2"].set(func(p *fakeProxy) { p.stepAt, p.step = s.R.Add(500*ms), -time.Second })
	for _, off := range []time.Duration{1200 * ms, 1500 * ms, 3 * time.Second, 3300 * ms} {
		expect(t, s.round(off), drain.RoutingPending, "clock was stepped")
	}
	s.syncsAt("n2", -5*time.Second, 5*ms, 3400*ms)
	expect(t, s.round(3500*ms), drain.RoutingWithdrawn)
}

// A node that answered, then went silent (its packets dropped for a while)
// and answers the waiting request on the same connection once they pass is
// the same kube-proxy: its new lastUpdated is a sync, not a restarted
// instance's start stamp, and confirms as any sync does. The same silence
// ending on a new connection (TestConfirmRestartStamp) may be a restart.
func TestConfirmSilenceOnTheKeptConnection(t *testing.T) {
	s := newScenario(t, Config{RequestTimeout: 200 * ms})
	s.syncsAt("n2", -5*time.Second)
	expect(t, s.round(100*ms), drain.RoutingPending, "no sync since the change")
	s.syncsAt("n2", -5*time.Second, 400*ms) // it syncs the change
	s.proxies["n2"].set(func(p *fakeProxy) { p.hang = true })
	expect(t, s.round(600*ms), drain.RoutingPending, "accepted but did not answer within 200ms")
	// The packets pass again at R+700ms: kube-proxy answers the request
	// waiting since R+600ms.
	s.clk.Step(100 * ms)
	p := s.proxies["n2"]
	p.mu.Lock()
	before, served := p.requests, p.served
	p.mu.Unlock()
	p.set(func(p *fakeProxy) { p.hang = false })
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(time.Millisecond) {
		p.mu.Lock()
		answered := p.served > served
		p.mu.Unlock()
		if answered {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the waiting request was not answered within 2s of the packets passing")
		}
	}
	if got := s.round(800 * ms); got.State != drain.RoutingWithdrawn {
		t.Fatalf("after the late answer on the kept connection: %s (%s), want withdrawn", got.State, got.Detail())
	}
	if n := p.requestCount() - before; n != 0 {
		t.Errorf("%d new requests for the waiting one's answer, want 0: it was read where it waited", n)
	}
}

// kube-proxy restarted between two polls: no poll failed, but the
// connection that answered before was closed by the node (kube-proxy's
// server keeps idle connections open: only its end closes them). The new
// instance's start stamp must not confirm, as after a refused poll; the
// sync after it does. Found by the fault campaign: a restart 0.6 s after
// the delete, before the old instance synced, was confirmed on the new
// one's start stamp and a fresh connection reached the pod after the
// verdict.
func TestConfirmRestartBetweenPolls(t *testing.T) {
	s := newScenario(t, Config{})
	s.syncsAt("n2", -5*time.Second)
	expect(t, s.round(100*ms), drain.RoutingPending, "no sync since the change")
	s.servers["n2"].CloseClientConnections() // the old instance is gone
	s.syncsAt("n2", -5*time.Second, 1300*ms) // the new instance's start stamp
	for _, off := range []time.Duration{1400 * ms, 1600 * ms} {
		expect(t, s.round(off), drain.RoutingPending, "may be a restarted kube-proxy's start, not a sync")
	}
	s.syncsAt("n2", -5*time.Second, 1300*ms, 1800*ms) // its first sync
	expect(t, s.round(1900*ms), drain.RoutingWithdrawn)
}

// kube-proxy restarted after the withdrawal and before hapsuper's first
// poll of its node (the kubelet's stop signal lagged the withdrawal, and the
// watch had not seen the pod's deletion either): the old instance, killed
// before it synced the change, left rules that still pick the pod; the new
// one stamped lastUpdated when its sync loop started, D past the change,
// and syncs seconds later. No poll failed and no connection was lost, but
// the stamp is first seen on a new connection: it must not confirm; the
// first sync, seen on that connection, does.
func TestConfirmRestartBeforeFirstPoll(t *testing.T) {
	s := newLateScenario(t, Config{})
	s.syncsAt("n2", -5*time.Second, 400*ms) // R+400ms: the new instance's start stamp
	for _, off := range []time.Duration{500 * ms, 1500 * ms, 2500 * ms} {
		expect(t, s.round(off), drain.RoutingPending, "first seen on a new connection, after the change")
	}
	s.syncsAt("n2", -5*time.Second, 400*ms, 2900*ms) // its first sync
	expect(t, s.round(3*time.Second), drain.RoutingWithdrawn)

	// Seen deleted first, the pod's node was asked before the withdrawal:
	// the restart then closes that connection, and the start stamp on the
	// new one waits as after any restart.
	s = newScenario(t, Config{})
	if n := s.proxies["n2"].requestCount(); n != 1 {
		t.Fatalf("the pod's deletion led to %d requests before the withdrawal, want 1 (the baseline)", n)
	}
	s.servers["n2"].CloseClientConnections() // the old instance is gone
	s.syncsAt("n2", -5*time.Second, 400*ms)
	for _, off := range []time.Duration{500 * ms, 1500 * ms, 2500 * ms} {
		expect(t, s.round(off), drain.RoutingPending, "may be a restarted kube-proxy's start")
	}
	s.syncsAt("n2", -5*time.Second, 400*ms, 2900*ms)
	expect(t, s.round(3*time.Second), drain.RoutingWithdrawn)
}

// An ordinary drain with the pod's deletion seen first: the baseline's
// connection carries the withdrawal's sync (R+300ms, past D), which
// confirms on the first poll that sees it, as before the baseline existed.
func TestConfirmBaselineThenSync(t *testing.T) {
	s := newScenario(t, Config{})
	s.syncsAt("n2", -5*time.Second, 300*ms)
	expect(t, s.round(400*ms), drain.RoutingWithdrawn)
	if n := s.proxies["n2"].requestCount(); n != 2 {
		t.Errorf("%d requests, want 2: the baseline and one poll", n)
	}
}
