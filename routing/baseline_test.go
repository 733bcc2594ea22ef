package routing

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/hapsuper/hapsuper/drain"
	"github.com/hapsuper/hapsuper/routing/judge"
)

// connCount counts the connections a node's healthz accepted, and
// those closed.
type connCount struct{ n, closed atomic.Int64 }

func (c *connCount) state(_ net.Conn, s http.ConnState) {
	switch s {
	case http.StateNew:
		c.n.Add(1)
	case http.StateClosed, http.StateHijacked:
		c.closed.Add(1)
	}
}

// servingNode is a node's healthz, its asks logged and its connections
// counted.
type servingNode struct {
	proxy *fakeProxy
	asks  *askLog
	conns *connCount
	srv   *httptest.Server
}

func startServingNode(t *testing.T, s *scenario) *servingNode {
	t.Helper()
	n := &servingNode{proxy: &fakeProxy{clk: s.clk, syncs: []time.Time{t0.Add(5 * time.Second)}}, conns: &connCount{}}
	n.asks = &askLog{next: n.proxy, clk: s.clk}
	n.srv = httptest.NewUnstartedServer(n.asks)
	n.srv.Config.ConnState = n.conns.state
	n.srv.Start()
	t.Cleanup(n.srv.Close)
	return n
}

// servingScenario is newScenario while the pod serves: nodes n2, n3, …
// whose kube-proxies last synced 5 s after the start, the pod ready in
// its slice, no deletion seen and no stop requested. R is 10 s after the
// start.
func servingScenario(t *testing.T, cfg Config, nodes ...string) (*scenario, map[string]*servingNode) {
	t.Helper()
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
	s := &scenario{testObserver: newTestObserver(t, cfg, client), t: t, proxies: map[string]*fakeProxy{}, servers: map[string]*httptest.Server{}}
	all := map[string]*servingNode{}
	for i, name := range nodes {
		n := startServingNode(t, s)
		s.proxies[name], s.servers[name], all[name] = n.proxy, n.srv, n
		s.routes[fmt.Sprintf("10.0.0.%d:10256", i+2)] = n.srv.Listener.Addr().String()
	}
	s.apply(service("web"), v4("web-a", "web", mine(readyC), peer("n2", readyC)))
	s.clk.Step(10 * time.Second)
	s.R = s.clk.Now()
	return s, all
}

// baselineTestPeriod is the baseline period of the tests below: many
// serving rounds long, as the default's 90 s is, so that a node is asked
// within a round of its instant.
const baselineTestPeriod = time.Minute

// ticks are Run's ticks from R+from to R+to, every step.
func ticks(from, to, step time.Duration) []time.Duration {
	var out []time.Duration
	for off := from; off < to; off += step {
		out = append(out, off)
	}
	return out
}

// While the pod serves, each node is asked once a period (a little less:
// jittered), each at its own instant, always over the one connection it
// answered on first.
func TestBaselineAsksEachNodeOncePerPeriodOnOneConnection(t *testing.T) {
	const period = baselineTestPeriod
	nodes := []string{"n2", "n3", "n4", "n5"}
	s, ns := servingScenario(t, Config{BaselinePeriod: period}, nodes...)
	s.runRounds(ticks(0, 3*period, servingRound)...)
	first := map[time.Duration]bool{}
	for _, name := range nodes {
		at := ns[name].asks.offsets(s.R)
		t.Logf("%s asked at R+%v", name, at)
		// The first within the first period, then every 0.8-1 period
		// (a round's rounding on top): 3 or 4 in 3 periods.
		if len(at) < 3 || len(at) > 4 {
			t.Errorf("%s asked %d times in 3 periods, want 3 or 4: %v", name, len(at), at)
			continue
		}
		if at[0] >= period {
			t.Errorf("%s first asked at R+%v, want within the first period %v", name, at[0], period)
		}
		for i := 1; i < len(at); i++ {
			if gap := at[i] - at[i-1]; gap < 4*period/5-servingRound || gap > period+servingRound {
				t.Errorf("%s asked %v after the ask before, want 0.8-1 period (%v)", name, gap, period)
			}
		}
		first[at[0]] = true
		if c := ns[name].conns.n.Load(); c != 1 {
			t.Errorf("%s accepted %d connections, want 1: the baseline keeps the one it answered on", name, c)
		}
	}
	if len(first) < 2 {
		t.Errorf("every node first asked at the same instant: want them spread over the period")
	}
	expect(t, s.Routing(s.clk.Now()), drain.RoutingPending)
}

// What the baseline is for: a node whose sync comes before the drain's
// first poll of it (thousands of nodes, asked in turn) is confirmed by
// that poll, the process that answered being known from the baseline's
// connection; without the baseline, that first answer's lastUpdated may
// be a restarted kube-proxy's start stamp, and the node waits for a later
// sync.
func TestBaselineLetsTheFirstPollAfterTheSyncConfirm(t *testing.T) {
	for _, c := range []struct {
		period time.Duration
		want   drain.RoutingState
	}{{baselineTestPeriod, drain.RoutingWithdrawn}, {0, drain.RoutingPending}} {
		t.Run(fmt.Sprint("baseline ", c.period), func(t *testing.T) {
			s, ns := servingScenario(t, Config{BaselinePeriod: c.period}, "n2")
			s.runRounds(ticks(0, baselineTestPeriod, servingRound)...)
			// The withdrawal at W, the node's sync 300 ms later (late
			// enough to hold it), the drain's first poll of the node
			// 400 ms after W.
			s.clk.Step(baselineTestPeriod + 10*time.Second - s.clk.Now().Sub(s.R))
			s.R = s.clk.Now()
			s.apply(v4("web-a", "web", mine(servingTermC), peer("n2", readyC)))
			s.StopRequested(s.R)
			s.syncsAt("n2", -15*time.Second, 300*ms)
			got := s.round(400 * ms)
			if got.State != c.want {
				t.Fatalf("after the first poll past the sync: %s (%s), want %s", got.State, got.Detail(), c.want)
			}
			if c.period > 0 && ns["n2"].conns.n.Load() != 1 {
				t.Errorf("n2 accepted %d connections, want 1", ns["n2"].conns.n.Load())
			}
		})
	}
}

// The node list while serving: read again every baselineRelist periods; a
// node added is asked within the period after, a node deleted is no
// longer asked and its connection is closed. An API server that fails the
// list leaves the set as it was, and is not asked again sooner.
func TestBaselineFollowsTheNodeList(t *testing.T) {
	const period = baselineTestPeriod
	s, ns := servingScenario(t, Config{BaselinePeriod: period}, "n2", "n3")
	var lists atomic.Int64
	var apiDown atomic.Bool
	s.client.PrependReactor("list", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		lists.Add(1)
		if apiDown.Load() {
			return true, nil, errors.New("connection refused")
		}
		return false, nil, nil
	})
	s.runRounds(ticks(0, period, servingRound)...)
	if got := ns["n3"].proxy.requestCount(); got != 1 {
		t.Fatalf("n3 asked %d times in the first period, want 1", got)
	}
	// n3 goes, n4 comes.
	if err := s.client.Tracker().Delete(corev1.SchemeGroupVersion.WithResource("nodes"), "", "n3"); err != nil {
		t.Fatal(err)
	}
	n4 := startServingNode(t, s)
	s.routes["10.0.0.4:10256"] = n4.srv.Listener.Addr().String()
	if err := s.client.Tracker().Add(node("n4", "10.0.0.4")); err != nil {
		t.Fatal(err)
	}
	// Listed again baselineRelist periods after the first list, at R.
	relisted := time.Duration(baselineRelist) * period
	s.runRounds(ticks(period, relisted+2*period, servingRound)...)
	if got := ns["n3"].proxy.requestCount(); got < baselineRelist-1 || got > baselineRelist+1 {
		t.Errorf("n3, deleted, asked %d times in all, want about %d: once a period until the list was read again", got, baselineRelist)
	}
	waitFor(t, "n3's kept connection closed once the node left the list", func() bool { return ns["n3"].conns.closed.Load() == 1 })
	before3 := ns["n3"].proxy.requestCount()
	if got := n4.proxy.requestCount(); got < 1 || got > 2 {
		t.Errorf("n4, added, asked %d times in the two periods after the list was read again, want 1 or 2", got)
	}
	if ns["n2"].conns.n.Load() != 1 || n4.conns.n.Load() != 1 {
		t.Errorf("connections accepted: n2 %d, n4 %d, want 1 each", ns["n2"].conns.n.Load(), n4.conns.n.Load())
	}
	// The API server goes away: the nodes are asked as last listed, the
	// list tried every baselineRelist periods.
	apiDown.Store(true)
	before, n2Before := lists.Load(), ns["n2"].proxy.requestCount()
	from := relisted + 2*period
	s.runRounds(ticks(from, from+2*relisted, servingRound)...)
	if got := lists.Load() - before; got < 1 || got > 2 {
		t.Errorf("the node list was tried %d times in %d periods with the API server away, want once every %d", got, 2*baselineRelist, baselineRelist)
	}
	if got := ns["n2"].proxy.requestCount() - n2Before; got < 2*baselineRelist || got > 2*baselineRelist+2 {
		t.Errorf("n2 asked %d times in %d periods with the API server away, want about one a period", got, 2*baselineRelist)
	}
	if got := ns["n3"].proxy.requestCount(); got != before3 {
		t.Errorf("n3, deleted, asked %d more times", got-before3)
	}
}

// A kube-proxy that restarts while the pod serves closes the kept
// connection: the next baseline poll answers on a new one, and the one
// after on that connection ties the new process, so the drain's first
// poll after the sync still confirms.
func TestBaselineAfterAKubeProxyRestart(t *testing.T) {
	const period = baselineTestPeriod
	s, ns := servingScenario(t, Config{BaselinePeriod: period}, "n2")
	s.runRounds(ticks(0, period, servingRound)...)
	s.servers["n2"].CloseClientConnections() // the restart
	s.proxies["n2"].set(func(p *fakeProxy) { p.syncs = []time.Time{s.R.Add(period + time.Second)} })
	s.runRounds(ticks(period, 3*period, servingRound)...)
	if got := ns["n2"].conns.n.Load(); got != 2 {
		t.Errorf("n2 accepted %d connections, want 2: one before the restart, one after", got)
	}
	s.clk.Step(3*period + 10*time.Second - s.clk.Now().Sub(s.R))
	s.R = s.clk.Now()
	s.apply(v4("web-a", "web", mine(servingTermC), peer("n2", readyC)))
	s.StopRequested(s.R)
	s.syncsAt("n2", -29*time.Second, 300*ms)
	if got := s.round(400 * ms); got.State != drain.RoutingWithdrawn {
		t.Fatalf("after the first poll past the sync: %s (%s), want withdrawn", got.State, got.Detail())
	}
}

// waitFor waits up to 5 s of real time for ok.
func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !ok(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Errorf("not seen within 5 s: %s", what)
			return
		}
	}
}

// However the passes over the nodes overlap, the baseline asks at most
// baselineRate nodes a second, a round's worth at once (rounds every
// servingRound as Run's while serving, or more often), and no fewer: 400
// nodes, whose period stretches to 8 s, asked over 20 s.
func TestBaselineRate(t *testing.T) {
	for _, every := range []time.Duration{time.Second, 200 * ms} { // a second: Run's round at this period (an eighth of it)
		t.Run(fmt.Sprint("rounds every ", every), func(t *testing.T) { testBaselineRate(t, every) })
	}
}

func testBaselineRate(t *testing.T, every time.Duration) {
	const nodes = 400
	s, ns := servingScenario(t, Config{BaselinePeriod: time.Second}, "n2")
	for i := range nodes - 1 {
		name, ip := fmt.Sprintf("m%03d", i), fmt.Sprintf("10.0.1.%d", i%250+1)
		if i >= 250 {
			ip = fmt.Sprintf("10.0.2.%d", i%250+1)
		}
		if err := s.client.Tracker().Add(node(name, ip)); err != nil {
			t.Fatal(err)
		}
		s.routes[ip+":10256"] = ns["n2"].srv.Listener.Addr().String() // one server answers for all
	}
	s.runRounds(ticks(0, 20*time.Second, every)...)
	at := ns["n2"].asks.offsets(s.R)
	if len(at) < nodes {
		t.Fatalf("%d asks in 20 s, want every one of the %d nodes asked", len(at), nodes)
	}
	// Within any round's span (a second at least), at most a round's
	// worth at the rate, and half again for passes that overlap.
	span := max(every, time.Second)
	most := int(baselineRate*span.Seconds()) * 3 / 2
	for i := range at {
		j := i
		for j < len(at) && at[j]-at[i] < span {
			j++
		}
		if j-i > most {
			t.Fatalf("%d nodes asked from R+%v within %v, want at most %d", j-i, at[i], span, most)
		}
	}
	// Every node once in its stretched period of 8 s, 2.5 times in 20 s,
	// the first pass front-loaded: 1,000 asks at 50 a second.
	if len(at) < 20*baselineRate*9/10 || len(at) > 20*baselineRate+baselineRate/2 {
		t.Errorf("%d asks in 20 s, want about %d (50 a second)", len(at), 20*baselineRate)
	}
	t.Logf("%d asks in 20 s", len(at))
}

// Once the first pass over the nodes is over, and only then, Run is asked
// to return the heap it left free.
func TestBaselineReleasesTheFirstPassOnce(t *testing.T) {
	const period = baselineTestPeriod
	s, _ := servingScenario(t, Config{BaselinePeriod: period}, "n2", "n3")
	freed := func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.baseline.freeOS
	}
	s.clk.Step(period / 2)
	s.mu.Lock()
	s.popBaseline(s.clk.Now(), s.clk.Now().Add(200*ms)) // builds the first pass's queue
	s.mu.Unlock()
	if freed() {
		t.Fatal("asked to free memory while the first pass runs")
	}
	s.runRounds(ticks(period/2, 3*period, servingRound)...)
	// runRounds' rounds took the request: it is not pending any more, and
	// passes counted past the first.
	s.mu.Lock()
	passes := s.baseline.passes
	s.mu.Unlock()
	if passes < 2 || freed() {
		t.Errorf("after %d passes, free requested still %v: want it taken once the first pass ended", passes, freed())
	}
}

// What a baseline poll costs the observer while serving: one request on
// the node's kept connection, its answer parsed and recorded in the
// node's facts, against a listener that writes a kube-proxy's canned
// answer (its own cost is the server goroutine's, a read and a write).
// Prints the CPU time per poll (user + system, this process, the server
// included) beside the wall time: `go test ./routing -run '^$' -bench
// BaselinePoll`.
func BenchmarkBaselinePoll(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	now := time.Now().UTC()
	body := fmt.Sprintf(`{"lastUpdated":%q,"currentTime":%q,"nodeEligible":true,"healthy":true,"status":{"IPv4":{"lastUpdated":%q,"healthy":true}}}`,
		now.Format(time.RFC3339Nano), now.Format(time.RFC3339Nano), now.Add(-time.Minute).Format(time.RFC3339Nano))
	answer := []byte(fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Content-Type-Options: nosniff\r\nDate: Sun, 06 Dec 2026 03:00:00 GMT\r\nContent-Length: %d\r\n\r\n%s", len(body), body))
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 4096)
				for {
					if _, err := c.Read(buf); err != nil {
						return
					}
					if _, err := c.Write(answer); err != nil {
						return
					}
				}
			}()
		}
	}()
	hc := newHealthzClient(pollDialer.DialContext, time.Second)
	defer hc.CloseIdleConnections()
	n := judge.NewNode("node-0042", ln.Addr().String())
	ctx := b.Context()
	cpu := func() time.Duration {
		var ru syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	b.ReportAllocs()
	b.ResetTimer()
	start := cpu()
	for b.Loop() {
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		sent := time.Now()
		a, err := hc.poll(rctx, n.Addr)
		cancel()
		if err != nil {
			b.Fatal(err)
		}
		h, err := parseHealthz(a.body)
		if err != nil {
			b.Fatal(err)
		}
		n.Record(h, sent, time.Now(), 250*time.Millisecond, a.kept)
	}
	b.ReportMetric(float64((cpu()-start).Microseconds())/float64(b.N), "cpu-µs/poll")
}

// Run's rounds while the pod serves: every servingRound with the baseline
// on (an eighth of a short period), once a servingIdleRound without it;
// the balancers' checks are not asked until the stop request.
func TestServingRounds(t *testing.T) {
	for _, c := range []struct {
		period, want time.Duration
	}{{90 * time.Second, servingRound}, {8 * time.Second, time.Second}, {2 * time.Second, DefaultHealthzPollInterval}, {0, servingIdleRound}} {
		t.Run(fmt.Sprint("baseline ", c.period), func(t *testing.T) {
			s, _ := servingScenario(t, Config{BaselinePeriod: c.period}, "n2")
			if got := s.roundEvery(); got != c.want {
				t.Errorf("a round every %v while serving, want %v", got, c.want)
			}
			if s.balancerDue(s.clk.Now(), s.roundEvery()) {
				t.Error("balancers' checks due while serving")
			}
			s.StopRequested(s.clk.Now())
			if got := s.roundEvery(); got != DefaultHealthzPollInterval {
				t.Errorf("a round every %v from the stop request, want the poll interval %v", got, DefaultHealthzPollInterval)
			}
			if !s.balancerDue(s.clk.Now(), s.roundEvery()) {
				t.Error("balancers' checks not due from the stop request")
			}
		})
	}
}

// A serving round asks at most baselineConcurrency nodes at once, however
// high Concurrency is, and once the drain starts it asks no more of them:
// the drain's own round asks them at once.
func TestServingRoundConcurrency(t *testing.T) {
	const nodes = 24
	s, ns := servingScenario(t, Config{BaselinePeriod: time.Second, Concurrency: 32}, "n2")
	var inFlight, most, asked atomic.Int64
	var hold atomic.Bool
	first, release := make(chan struct{}, nodes), make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		asked.Add(1)
		if hold.Load() {
			first <- struct{}{}
			<-release
		} else {
			time.Sleep(5 * time.Millisecond) // long enough for the polls to overlap
		}
		ns["n2"].asks.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	for i := range nodes {
		ip := fmt.Sprintf("10.0.1.%d", i+1)
		if err := s.client.Tracker().Add(node(fmt.Sprintf("m%02d", i), ip)); err != nil {
			t.Fatal(err)
		}
		s.routes[ip+":10256"] = srv.Listener.Addr().String()
	}
	s.runRounds(ticks(0, 3*time.Second, s.roundEvery())...)
	if got := most.Load(); got > baselineConcurrency || got < 2 {
		t.Errorf("%d requests in flight at most while serving, want 2 to %d", got, baselineConcurrency)
	}
	// The next round's polls are held until the stop request.
	hold.Store(true)
	before := asked.Load()
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.runRounds(3*time.Second + 10*time.Second) // every node due again
	}()
	<-first
	s.StopRequested(s.clk.Now())
	close(release)
	<-done
	if got := asked.Load() - before; got < 1 || got > baselineConcurrency {
		t.Errorf("the serving round asked %d nodes, want the %d at most in flight when the drain started", got, baselineConcurrency)
	}
}
