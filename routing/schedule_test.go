package routing

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/hapsuper/hapsuper/drain"
	"github.com/hapsuper/hapsuper/routing/judge"
)

// askLog records when (on the fake clock) a node's healthz was asked,
// before its fakeProxy answers.
type askLog struct {
	next http.Handler
	clk  interface{ Now() time.Time }

	mu   sync.Mutex
	at   []time.Time
	down bool // not logged, closed unanswered (setDown)
}

func (l *askLog) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	l.mu.Lock()
	down := l.down
	if !down {
		l.at = append(l.at, l.clk.Now())
	}
	l.mu.Unlock()
	if down {
		// A killed kube-proxy: the connection, kept or new, closes unanswered.
		if c, _, err := http.NewResponseController(w).Hijack(); err == nil {
			c.Close()
		}
		return
	}
	l.next.ServeHTTP(w, r)
}

// setDown makes the node's healthz close every connection unanswered
// (down) or answer again, whichever connection the observer kept.
func (l *askLog) setDown(down bool) {
	l.mu.Lock()
	l.down = down
	l.mu.Unlock()
}

// offsets are the instants asked, as offsets from r.
func (l *askLog) offsets(r time.Time) []time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []time.Duration
	for _, t := range l.at {
		out = append(out, t.Sub(r))
	}
	return out
}

// expect fails t unless the instants asked, as offsets from r, are want.
func (l *askLog) expect(t *testing.T, r time.Time, why string, want ...time.Duration) {
	t.Helper()
	if got := l.offsets(r); !slices.Equal(got, want) {
		t.Fatalf("n2 asked at R+%v, want R+%v: %s", got, want, why)
	}
}

// logAsks routes node n2's healthz through an askLog.
func (s *scenario) logAsks() *askLog {
	l := &askLog{next: s.proxies["n2"], clk: s.clk}
	srv := httptest.NewServer(l)
	s.t.Cleanup(srv.Close)
	s.routes["10.0.0.2:10256"] = srv.Listener.Addr().String()
	// A connection kept from the baseline would bypass the log: the next
	// answer comes on a new one, which carries the later ones.
	s.http.CloseIdleConnections()
	return l
}

// runRounds runs Run's rounds (o.rounds) as its loop would, one at each
// offset from R (a tick or a kick), or at once when the clock is past it.
// While a round waits for a node's instant, the fake clock is stepped in
// 10 ms steps; each round is bounded by 10 s of real time.
func (s *scenario) runRounds(offs ...time.Duration) {
	s.t.Helper()
	for _, off := range offs {
		if d := s.R.Add(off).Sub(s.clk.Now()); d > 0 {
			s.clk.Step(d)
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			s.again = s.rounds(s.t.Context())
		}()
		deadline := time.Now().Add(10 * time.Second)
	wait:
		for {
			select {
			case <-done:
				break wait
			case <-time.After(time.Millisecond):
			}
			if time.Now().After(deadline) {
				s.t.Fatalf("the round at R+%v did not end within 10s", off)
			}
			if s.clk.HasWaiters() && !s.awaitingAnswer() {
				// Polls that have just ended leave the round a moment to
				// return before its timer is taken for a wait.
				select {
				case <-done:
					break wait
				case <-time.After(3 * time.Millisecond):
				}
				if s.clk.HasWaiters() && !s.awaitingAnswer() {
					s.clk.Step(10 * ms)
				}
			}
		}
	}
}

// awaitingAnswer says a drain round's poll waits for a kube-proxy that
// answers: the fake clock is not stepped meanwhile (a request takes no
// fake time, the proxies step it), only while the rounds wait for their
// instants or for hung proxies.
func (s *scenario) awaitingAnswer() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for n := range s.inFlight {
		if p := s.proxies[n.Name]; p == nil || !p.hung() {
			return true
		}
	}
	return false
}

// A round that outlasts the poll interval, or a kick (the stop request
// and the pod's deletion both kick), must not ask a node again at once:
// Run asks each node no sooner than PollInterval after it last did. The
// baseline at R, a kick at R and another at R+10ms, then ticks every
// interval; the node syncs at R+700ms: it is asked at R, R+interval and
// R+2·interval, where the sync confirms it, and no more.
func TestScheduleAsksNodeOncePerInterval(t *testing.T) {
	s := newScenario(t, Config{})
	asks := s.logAsks()
	// The baseline, asked before the log: its instant is R.
	baseline := s.proxies["n2"].requestCount()
	if baseline != 1 {
		t.Fatalf("baseline asked n2 %d times, want 1", baseline)
	}
	s.syncsAt("n2", -5*time.Second, 700*ms)
	p := s.cfg.PollInterval
	s.runRounds(0, 10*ms, p, 2*p, 3*p, 4*p)
	got := asks.offsets(s.R)
	want := []time.Duration{p, 2 * p}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("n2 asked after the baseline at R+%v, want R+%v (the interval after the last ask, until it confirmed)", got, want)
	}
	expect(t, s.Routing(s.clk.Now()), drain.RoutingWithdrawn)
}

// A node asked long before the withdrawal (the pod's deletion seen 2 s
// before it) is asked at the first round after it, then once per
// interval, kicks notwithstanding: nothing holds it back further, since an
// answer can show kube-proxy frozen at any time. It syncs at R+400ms:
// asked at R (no sync yet) and R+interval, where it confirms.
func TestScheduleAfterAnEarlyBaseline(t *testing.T) {
	client := fake.NewClientset()
	if err := client.Tracker().Add(node("n2", "10.0.0.2")); err != nil {
		t.Fatal(err)
	}
	s := &scenario{testObserver: newTestObserver(t, Config{Mode: ModeKubeProxy, Concurrency: 1}, client), t: t,
		proxies: map[string]*fakeProxy{}, servers: map[string]*httptest.Server{}}
	s.proxies["n2"] = &fakeProxy{clk: s.clk, syncs: []time.Time{t0.Add(5 * time.Second)}}
	asks := s.logAsks()
	s.apply(service("web"), v4("web-a", "web", mine(readyC), peer("n2", readyC)))
	s.clk.Step(10 * time.Second)
	deleted := metav1.NewTime(s.clk.Now())
	s.apply(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: me.PodName, Namespace: me.Namespace, DeletionTimestamp: &deleted}})
	s.R = s.clk.Now()
	s.runRounds(0) // the baseline, at the deletion
	s.clk.Step(2 * time.Second)
	s.R = s.clk.Now()
	s.apply(v4("web-a", "web", mine(servingTermC), peer("n2", readyC)))
	s.StopRequested(s.R)
	s.syncsAt("n2", -5*time.Second, 400*ms)

	p := s.cfg.PollInterval
	s.runRounds(0, 10*ms, p, 2*p, 3*p)
	asks.expect(t, s.R, "once per interval after the withdrawal", -2*time.Second, 0, p)
	expect(t, s.Routing(s.clk.Now()), drain.RoutingWithdrawn)
}

// fanOutAt starts each item no sooner than its instant on the clock, and
// returns, without starting the rest, when ctx ends while it waits.
func TestFanOutAtWaitsForEachInstant(t *testing.T) {
	clk := testingclock.NewFakeClock(t0)
	due := []time.Duration{0, 100 * ms, 100 * ms, 300 * ms}
	var mu sync.Mutex
	var started []time.Duration
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan struct{})
	var wg sync.WaitGroup
	var n int
	go func() {
		defer close(done)
		n = fanOutAt(ctx, clk, make(chan struct{}, 2), &wg, []int{0, 1, 2, 3}, func(i int) time.Time { return t0.Add(due[i]) }, func(i int) func() {
			return func() {
				mu.Lock()
				started = append(started, clk.Since(t0))
				mu.Unlock()
			}
		})
		wg.Wait()
	}()
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(started)
	}
	// Step 10 ms at a time while fanOutAt waits, until three have
	// started; then end ctx while it waits for the fourth (at 300 ms).
	deadline := time.Now().Add(10 * time.Second)
	for count() < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("after 10s: %d of 3 started", count())
		}
		if clk.HasWaiters() {
			clk.Step(10 * ms)
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("fanOutAt did not return within 10s of ctx's end")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(started) != 3 || n != 3 {
		t.Fatalf("started at %v, %d said started: want 3, the fourth not after ctx ended", started, n)
	}
	for i, at := range started {
		if at < due[i] {
			t.Errorf("item %d started at +%v, before its instant +%v", i, at, due[i])
		}
	}
}

// twoNodesAnswered is a drain over n2 and n3, each asked 200 ms apart and
// last synced 5 s before the change, through the rounds that answer them
// "no sync since the change"; asks logs n2's healthz requests.
func twoNodesAnswered(t *testing.T) (*scenario, *askLog) {
	s := newScenario(t, Config{MinPollInterval: 200 * ms, RequestTimeout: 5 * time.Second, Concurrency: 2}, "n2", "n3")
	asks := s.logAsks()
	s.syncsAt("n2", -5*time.Second)
	s.syncsAt("n3", -5*time.Second)
	s.runRounds(0, 10*ms, 200*ms)
	return s, asks
}

// A drain's round does not wait for a node that does not answer (n3,
// filtered): its poll holds no other node's. n2 restarts meanwhile; it is
// asked 20 ms after its refusal and on the same connection after that,
// while n3's poll still waits, and n3 is not asked again until its poll
// has returned. Checked by the order of events, not by durations: each
// round returns while n3's request still hangs (the client has not given
// up on it), where a round that waited for its polls would return only
// after the client's RequestTimeout.
func TestScheduleRoundDoesNotWaitForASilentNode(t *testing.T) {
	s, asks := twoNodesAnswered(t)
	n3 := s.proxies["n3"]
	before := n3.requestCount()
	n3.set(func(p *fakeProxy) { p.hang = true })
	addr := s.routes["10.0.0.2:10256"]
	delete(s.routes, "10.0.0.2:10256") // n2 killed: its port refuses
	s.http.CloseIdleConnections()
	s.runRounds(400 * ms)
	n3.mu.Lock()
	asked, gaveUp := n3.requests-before, n3.gaveUp
	n3.mu.Unlock()
	if asked > 1 || gaveUp != 0 {
		t.Fatalf("the round at R+400ms returned with n3 asked %d times and given up on %d times, want its one poll still waiting", asked, gaveUp)
	}
	if now := s.clk.Now().Sub(s.R); now != 420*ms || !s.again {
		t.Fatalf("the round at R+400ms returned at R+%v wanting the next at once: %v; want R+420ms (20 ms after n2's refusal) and at once", now, s.again)
	}
	s.routes["10.0.0.2:10256"] = addr
	s.syncsAt("n2", -5*time.Second, 415*ms, 432*ms) // back: the start stamp, the first sync 17 ms later
	s.runRounds(420*ms, 620*ms)
	asks.expect(t, s.R, "on its schedule, 20 ms after the refusal, then on its schedule, while n3's poll waits", 200*ms, 420*ms, 620*ms)
	for deadline := time.Now().Add(5 * time.Second); n3.requestCount() == before && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond) // the request may still be on its way
	}
	n3.mu.Lock()
	asked, gaveUp = n3.requests-before, n3.gaveUp
	n3.hang = false // its answer comes now
	n3.mu.Unlock()
	if asked != 1 || gaveUp != 0 {
		t.Fatalf("n3 asked %d times (given up on %d) while its first poll waited, want once", asked, gaveUp)
	}
	s.mu.Lock()
	v, _ := s.judging.Rule.Node(s.nodes["n2"], judge.Targets(s.watch.paths))
	s.mu.Unlock()
	if v != judge.NodeConfirmed {
		t.Errorf("n2 is %v after its first sync on the start stamp's connection, want confirmed", v)
	}
}

// With MinPollInterval, few nodes are asked that often: the poll after a
// sync comes sooner. n2 syncs at R+700ms: asked every 200 ms after the
// kicks, it confirms at R+800ms, where every 500 ms it waited for R+1s.
func TestScheduleFewNodesAtTheShortInterval(t *testing.T) {
	s := newScenario(t, Config{MinPollInterval: 200 * ms})
	asks := s.logAsks()
	s.syncsAt("n2", -5*time.Second, 700*ms)
	if got := s.tickEvery(); got != 200*ms {
		t.Fatalf("tickEvery() = %v, want the short interval 200ms", got)
	}
	s.runRounds(0, 10*ms, 200*ms, 400*ms, 600*ms, 800*ms, time.Second, 1200*ms)
	asks.expect(t, s.R, "every 200 ms until it confirmed", 200*ms, 400*ms, 600*ms, 800*ms)
	expect(t, s.Routing(s.clk.Now()), drain.RoutingWithdrawn)
}

// pollEvery grows with the nodes at pollRate a second, between the two
// intervals; without MinPollInterval it is PollInterval.
func TestPollEveryGrowsWithTheNodes(t *testing.T) {
	for _, tc := range []struct {
		min   time.Duration
		nodes int
		want  time.Duration
	}{
		{200 * ms, 2, 200 * ms},
		{200 * ms, pollRate / 5, 200 * ms},
		{200 * ms, pollRate * 3 / 10, 300 * ms},
		{200 * ms, pollRate, 500 * ms},
		{200 * ms, 5000, 500 * ms},
		{0, 2, 500 * ms},
		{time.Second, 2, 500 * ms}, // never above PollInterval
	} {
		o := &Observer{cfg: Config{PollInterval: 500 * ms, MinPollInterval: tc.min}, nodes: map[string]*judge.Node{}}
		for i := range tc.nodes {
			name := fmt.Sprintf("n%d", i)
			o.nodes[name] = judge.NewNode(name, "")
		}
		if got := o.pollEvery(); got != tc.want {
			t.Errorf("MinPollInterval %v, %d nodes: pollEvery() = %v, want %v", tc.min, tc.nodes, got, tc.want)
		}
	}
}

// With the metrics witness and few nodes, a node is also asked D after the
// withdrawal's receipt, the first instant its metrics can prove a sync
// that ran right after it (judge's queued-change rule), when its next
// turn comes later; Run starts a round then (untilNextRound). Without the
// witness the same rounds ask it on its schedule only.
func TestScheduleAsksAtTheFirstProof(t *testing.T) {
	for _, tc := range []struct {
		name    string
		metrics int
		want    []time.Duration
	}{
		{"metrics witness", 10249, []time.Duration{200 * ms, 250 * ms, 450 * ms, 650 * ms, 850 * ms}},
		{"healthz alone", 0, []time.Duration{200 * ms, 400 * ms, 600 * ms, 800 * ms}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newScenario(t, Config{MinPollInterval: 200 * ms, MetricsPort: tc.metrics})
			asks := s.logAsks()
			s.syncsAt("n2", -5*time.Second, 700*ms)
			s.runRounds(0, 10*ms) // the second asks it at R+200ms, its turn
			now := s.clk.Now()
			want := 200 * ms // a round's period, from a round started now
			if tc.metrics > 0 {
				want = s.R.Add(250 * ms).Sub(now) // at R + D: before the next tick
			}
			if got := s.untilNextRound(now); got != want {
				t.Errorf("next round in %v at R+%v, want %v", got, now.Sub(s.R), want)
			}
			s.runRounds(250*ms, 400*ms, 600*ms, 800*ms, time.Second)
			asks.expect(t, s.R, "on its schedule, and at R + D with the witness", tc.want...)
			expect(t, s.Routing(s.clk.Now()), drain.RoutingWithdrawn)
		})
	}
}

// A node whose kube-proxy restarts during the drain (its port refuses)
// is asked every restartPollEvery until it answers with a stamp, so that
// an answer falls between the new process's start stamp and its first
// sync: that sync, on the same connection, then confirms it. Asked every
// 200 ms instead, the first answer shows the first sync, which cannot be
// told from a start stamp, and the node waits for a later sync. A node
// whose poll timed out (frozen: its connection waits for the same
// process's answer) is asked on its schedule.
func TestScheduleWatchesARestart(t *testing.T) {
	s := newScenario(t, Config{MinPollInterval: 200 * ms})
	asks := s.logAsks()
	s.syncsAt("n2", -5*time.Second)
	s.runRounds(0, 10*ms, 200*ms) // answered: no sync since the change
	s.polling.Wait()              // its connection parked before it is closed
	addr := s.routes["10.0.0.2:10256"]
	delete(s.routes, "10.0.0.2:10256") // killed: the port refuses
	s.http.CloseIdleConnections()
	s.runRounds(400 * ms)
	if got := s.untilNextRound(s.clk.Now()); got != restartPollEvery {
		t.Fatalf("next round in %v after a refused poll at R+%v, want %v (proofAt R+%v, watched %d, awaits %v, asked %v)", got, s.clk.Now().Sub(s.R), restartPollEvery, s.proofAt.Sub(s.R), len(s.restartWatch), s.nodes["n2"].AwaitsStamp(), asks.offsets(s.R))
	}
	// A round that starts before the node's instant waits for it, and
	// the refusal then asks for the round 20 ms after that poll.
	s.runRounds(410 * ms)
	if got := s.untilNextRound(s.R.Add(410 * ms)); got != restartPollEvery {
		t.Fatalf("next round in %v after a refused poll at R+%v in a round started at R+410ms, want %v", got, s.clk.Now().Sub(s.R), restartPollEvery)
	}
	s.routes["10.0.0.2:10256"] = addr
	s.syncsAt("n2", -5*time.Second, 435*ms, 452*ms) // back: the start stamp, the first sync 17 ms later
	s.runRounds(440 * ms)
	if got := s.untilNextRound(s.clk.Now()); got != 200*ms {
		t.Errorf("next round in %v once a stamp was seen, want its schedule (200ms)", got)
	}
	s.runRounds(640 * ms)
	asks.expect(t, s.R, "on its schedule, 20 ms after each refusal, then on its schedule", 200*ms, 440*ms, 640*ms)
	expect(t, s.Routing(s.clk.Now()), drain.RoutingWithdrawn)

	// Timed out, not refused: asked on its schedule.
	s = newScenario(t, Config{MinPollInterval: 200 * ms, RequestTimeout: 100 * ms})
	s.syncsAt("n2", -5*time.Second)
	s.runRounds(0, 10*ms)
	s.proxies["n2"].set(func(p *fakeProxy) { p.hang = true })
	s.runRounds(200 * ms)
	if got := s.untilNextRound(s.clk.Now()); got < 100*ms {
		t.Errorf("next round in %v after a timed-out poll, want its schedule", got)
	}
}

// A node watched for its restart is asked every restartPollEvery even
// where another node is due later in the same round: the round does not
// hold the watch until that node's instant (the replay of a campaign's
// rollout 73: node1 refused, then asked at node2's 200 ms pace, its new
// kube-proxy's start stamp missed and its first sync taken for one, the
// drain bound). n2 is killed: its healthz closes every connection
// unanswered until, 50 ms after the first poll that failed, it serves
// with the start stamp, its first sync 140 ms later; n3 answers on its
// schedule. Rounds come as Run starts them. The watch asks n2 within
// 20 ms (plus a step of the fake clock) of its return, so the start stamp
// is seen and the first sync, on that connection, confirms n2; held to
// n3's instants, n2 was asked first 150 ms after its return, saw the
// first sync first and stayed pending.
func TestScheduleRestartWatchIsNotHeldByAnotherNodesInstant(t *testing.T) {
	s, asks := twoNodesAnswered(t)
	asks.setDown(true) // n2 killed
	n2 := s.nodes["n2"]
	judged := func() (awaits, confirmed bool) {
		s.mu.Lock()
		defer s.mu.Unlock()
		v, _ := s.judging.Rule.Node(n2, judge.Targets(s.watch.paths))
		return n2.AwaitsStamp(), v == judge.NodeConfirmed
	}
	var back time.Duration // n2's return, as an offset from R
	up := false
	for end := s.clk.Now().Add(time.Second); s.clk.Now().Before(end); {
		off := s.clk.Now().Sub(s.R)
		if back > 0 && off >= back && !up {
			up = true
			s.syncsAt("n2", -5*time.Second, back, back+140*ms)
			asks.setDown(false)
		}
		start := s.clk.Now()
		s.runRounds(off)
		awaits, confirmed := judged()
		if confirmed {
			break
		}
		if awaits && back == 0 {
			back = s.clk.Now().Sub(s.R) + 50*ms
		}
		if !s.again {
			s.clk.Step(max(s.untilNextRound(start), ms))
		}
	}
	if back == 0 {
		t.Fatal("n2's polls never failed once it was killed")
	}
	first := time.Duration(-1)
	for _, at := range asks.offsets(s.R) {
		if at >= back {
			first = at
			break
		}
	}
	if first < back || first > back+30*ms {
		t.Fatalf("n2 asked at R+%v; it came back at R+%v, want it asked within 30 ms (restartPollEvery and a clock step)", asks.offsets(s.R), back)
	}
	if _, confirmed := judged(); !confirmed {
		t.Fatalf("n2 pending at R+%v (asked at R+%v, back at R+%v), want confirmed by its first sync after the start stamp", s.clk.Now().Sub(s.R), asks.offsets(s.R), back)
	}
}
