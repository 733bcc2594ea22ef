package routing

import (
	"fmt"
	"net"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"

	"github.com/hapsuper/hapsuper/routing/judge"
)

// silentPort accepts connections and never reads or answers: a metrics
// port whose packets a firewall drops after the handshake, or a process
// that hangs. It counts the connections accepted.
type silentPort struct {
	ln net.Listener

	mu       sync.Mutex
	conns    []net.Conn
	accepted int
}

func newSilentPort(t testing.TB) *silentPort {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	p := &silentPort{ln: ln}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			p.conns = append(p.conns, c)
			p.accepted++
			p.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, c := range p.conns {
			c.Close()
		}
	})
	return p
}

func (p *silentPort) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.accepted
}

// fleet is an observer asking nodes nodes (10.1.x.y) whose kube-proxy
// healthz answers at once, from one server, with a sync 5 s before the
// change: every node stays pending, so every round asks every node. With
// a silent port, every node's metrics port is it.
type fleet struct {
	*testObserver
	names []string
}

func newFleet(t testing.TB, cfg Config, nodes int, silent *silentPort) *fleet {
	t.Helper()
	client := fake.NewClientset()
	f := &fleet{}
	for i := range nodes {
		name := fmt.Sprintf("node-%04d", i)
		if err := client.Tracker().Add(node(name, fmt.Sprintf("10.1.%d.%d", i/250, i%250+1))); err != nil {
			t.Fatal(err)
		}
		f.names = append(f.names, name)
	}
	cfg.Mode = ModeKubeProxy
	if silent != nil {
		cfg.MetricsPort = 10249
	}
	f.testObserver = newTestObserver(t, cfg, client)
	proxy := &fakeProxy{clk: f.clk, syncs: []time.Time{t0.Add(5 * time.Second)}}
	srv := httptest.NewServer(proxy)
	t.Cleanup(srv.Close)
	for i := range nodes {
		host := fmt.Sprintf("10.1.%d.%d", i/250, i%250+1)
		f.routes[host+":10256"] = srv.Listener.Addr().String()
		if silent != nil {
			f.routes[host+":10249"] = silent.ln.Addr().String()
		}
	}
	f.apply(service("web"), v4("web-a", "web", mine(readyC), peer("n2", readyC)))
	f.clk.Step(10 * time.Second)
	f.apply(v4("web-a", "web", mine(servingTermC), peer("n2", readyC)))
	f.StopRequested(f.clk.Now())
	return f
}

// round runs one of Run's rounds with every node due, and says how long
// it took (monotonic clock).
func (f *fleet) round(t testing.TB) time.Duration {
	t.Helper()
	f.clk.Step(time.Second) // every node due again
	start := time.Now()
	f.scheduledRound(t.Context(), f.clk.Now().Add(f.tickEvery()))
	return time.Since(start)
}

// A silent metrics port costs a round nothing: the rounds of a fleet
// whose every metrics port accepts and never answers take about as long
// as the same fleet's without the witness, measured side by side in one
// run (rounds interleaved, so that the machine's load falls on both);
// each node's metrics are asked once in the drain, and every healthz
// answer is recorded. Before, each round waited for the metrics
// requests, RequestTimeout each, Concurrency at a time: 64 nodes, 2 s a
// round.
func TestRoundSilentMetricsPort(t *testing.T) {
	const nodes, rounds = 64, 10
	cfg := Config{Concurrency: 32, RequestTimeout: time.Second, MinPollInterval: FastPollInterval}
	silent := newSilentPort(t)
	alone, witnessed := newFleet(t, cfg, nodes, nil), newFleet(t, cfg, nodes, silent)
	var aloneSum, witnessedSum time.Duration
	for i := range rounds {
		a, w := alone.round(t), witnessed.round(t)
		aloneSum += a
		witnessedSum += w
		t.Logf("round %d: healthz alone %v, with a silent metrics port %v", i+1, a.Round(time.Microsecond), w.Round(time.Microsecond))
	}
	ratio := float64(witnessedSum) / float64(aloneSum)
	t.Logf("%d rounds of %d nodes: healthz alone %v, with a silent metrics port %v: ratio %.2f",
		rounds, nodes, aloneSum.Round(time.Microsecond), witnessedSum.Round(time.Microsecond), ratio)
	if ratio > 5 {
		t.Errorf("rounds with a silent metrics port took %.1f times as long as without the witness, want at most 5", ratio)
	}
	// Rounds until every node's metrics were asked (Concurrency at a
	// time, a node skipped while the slots are full is asked at its next
	// answer), then more: none is asked twice.
	for range nodes {
		witnessed.witnessing.Wait() // the metrics reads the rounds started, each within MetricsTimeout
		if silent.count() >= nodes {
			break
		}
		witnessed.round(t)
	}
	asked := silent.count()
	for range 3 {
		witnessed.round(t)
	}
	witnessed.witnessing.Wait()
	if got := silent.count(); got != asked {
		t.Errorf("the silent metrics port accepted %d more connections after every node's metrics had failed once", got-asked)
	}
	witnessed.mu.Lock()
	for _, name := range witnessed.names {
		n := witnessed.nodes[name]
		if !n.Answered() {
			t.Errorf("%s: no healthz answer recorded", name)
		}
		if v, why := witnessed.judging.Rule.Node(n, judge.Targets(witnessed.watch.paths)); v != judge.NodePending || why == "" {
			t.Errorf("%s: verdict %d (%q), want pending on healthz's word", name, v, why)
		}
	}
	witnessed.mu.Unlock()
	if asked != nodes {
		t.Errorf("the silent metrics port accepted %d connections over %d rounds of %d nodes, want %d: each node's asked once", asked, rounds, nodes, nodes)
	}
}

// The round times with a silent metrics port at 96 and 1,000 simulated
// nodes, with the defaults (Concurrency 32, RequestTimeout 1 s): printed,
// not asserted: go test -run x -bench SilentMetricsRound -benchtime 3x ./routing/
func BenchmarkSilentMetricsRound(b *testing.B) {
	for _, nodes := range []int{96, 1000} {
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) {
			cfg := Config{Concurrency: DefaultConcurrency, RequestTimeout: DefaultRequestTimeout, MinPollInterval: FastPollInterval}
			silent := newSilentPort(b)
			alone, witnessed := newFleet(b, cfg, nodes, nil), newFleet(b, cfg, nodes, silent)
			var a, w time.Duration
			for b.Loop() {
				a += alone.round(b)
				w += witnessed.round(b)
			}
			witnessed.witnessing.Wait()
			b.ReportMetric(float64(a.Milliseconds())/float64(b.N), "ms/round-healthz")
			b.ReportMetric(float64(w.Milliseconds())/float64(b.N), "ms/round-silent-metrics")
			b.ReportMetric(float64(silent.count()), "silent-conns")
		})
	}
}

// A metrics port that timed out while the node's kube-proxy was frozen
// (healthz shows a stall: a poll that went unanswered, then an answer) is
// asked again after the stall, so that the witness serves the rest of the
// drain (the frozen matrix cells); one that timed out while healthz
// answered without a stall is not asked again.
func TestMetricsTimeoutInAStallIsNotHeldAgainstThePort(t *testing.T) {
	for _, stalled := range []bool{false, true} {
		t.Run(fmt.Sprintf("stalled %v", stalled), func(t *testing.T) {
			silent := newSilentPort(t)
			f := newFleet(t, Config{Concurrency: 4, RequestTimeout: time.Second, MinPollInterval: FastPollInterval}, 1, silent)
			f.round(t)
			f.witnessing.Wait() // the metrics read timed out
			if got := silent.count(); got != 1 {
				t.Fatalf("metrics asked %d times after the first answer, want 1", got)
			}
			f.mu.Lock()
			n := f.nodes[f.names[0]]
			if _, ok := f.metricsTimedOut[n]; !ok {
				t.Errorf("the timeout was not noted")
			}
			if stalled {
				// As pollNode records a poll that went unanswered: kube-proxy frozen.
				sent := f.clk.Now()
				n.Failed(&judge.PollError{Pending: true, Msg: "accepted but did not answer within 1s"}, sent, sent.Add(time.Second))
			}
			f.mu.Unlock()
			f.round(t) // healthz answers: the stall, if any, ends
			f.witnessing.Wait()
			f.mu.Lock()
			off := f.metricsOff[n]
			f.mu.Unlock()
			want := 1
			if stalled {
				want = 2
			}
			if got := silent.count(); got != want || off == stalled {
				t.Errorf("metrics asked %d times, off %v; want %d, off %v", got, off, want, !stalled)
			}
		})
	}
}
