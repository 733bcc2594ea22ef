package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hapsuper/hapsuper/bench/fakeapi"
	"github.com/hapsuper/hapsuper/conf"
	"github.com/hapsuper/hapsuper/drain"
	"github.com/hapsuper/hapsuper/routing"
	"github.com/hapsuper/hapsuper/routing/kube/kubefake"
	"github.com/hapsuper/hapsuper/test/harness"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// The fan-out part: one routing.Observer (in a child process, so its RSS
// is its own) confirms a withdrawal with N simulated kube-proxies. Each
// node's healthz is one address of 127.1.0.0/16 on a shared port, answered
// by one server in this process that tells the nodes apart by the address
// a connection was made to. Before its scripted sync a node reports a sync
// 5 s old (pending: no sync since the change); from it on, that sync.
// Syncs complete from T0+400 ms to T0+900 ms, T0 being when the child
// withdraws the pod in its fake API and requests the stop. With the
// metrics witness, each node's /metrics is served the same way on a
// second port, telling the same story: one process start per node, older
// than any stamp; the sync stamp 20 µs after healthz's lastUpdated (as
// kube-proxy sets the two); one change pending until the sync, none after.

// childEnv selects a child mode of this binary.
const childEnv = "HAPSUPER_BENCH_CHILD"

// Scripted syncs, after T0; the pod is deleted at T0 and withdrawn from
// its EndpointSlice endpointsLag later.
const (
	firstSync    = 400 * time.Millisecond
	syncSpan     = 500 * time.Millisecond
	endpointsLag = 50 * time.Millisecond
)

// confirmCheck is how often the child reads the verdict, as a drain does
// (--poll-interval's default): the confirmation's resolution. The verdict
// is judged over every node at each call, under the observer's lock
// (about 4 ms at 5,000 nodes on a loaded machine): read every 2 ms, it
// held the lock most of the time and slowed the polls it measures.
const confirmCheck = conf.DefaultCounterPollInterval

// metricsPadding stands in for the families kube-proxy's /metrics serves
// before kubeproxy_* and after process_* in name order (go_*, rest_client_*,
// workqueue_*: 100-300 KB in all): the client reads the first to reach
// the samples, and the rest to keep its connection.
const metricsPadding = 32 << 10

// fanoutResult is what the fan-out part measured.
type fanoutResult struct {
	nodes        int
	metrics      bool          // the metrics witness was on
	confirmAfter time.Duration // confirmed − last node's sync
	healthz      endpointCount
	metricsReqs  endpointCount // zero without the metrics witness
	maxInFlight  int64         // both endpoints at once, at the server
	maxPerNode   int64         // requests in flight to one node at once, both endpoints
	rssKB        int64         // the child's VmRSS once confirmed
	cpu          time.Duration // the child's CPU time from the stop request to the confirmation
	syncedKB     int64         // the child's VmRSS before the stop request
	// While serving, before the stop: what the observer cost, with the
	// baseline (-fanout-baseline) or without.
	baseline *baselineCost
}

// baselineCost is what the baseline while serving cost, measured before
// the stop request.
type baselineCost struct {
	period      time.Duration // the observer's setting
	covered     time.Duration // from the watch's sync until every node had been asked
	requests    int64         // healthz requests before T0
	idleWindow  time.Duration // the window idleCPU was measured over, every node asked before it
	idleCPU     time.Duration // the child's CPU time in it
	idleReqs    int64         // healthz requests in it
	conns       int64         // connections accepted before T0, all nodes
	maxConns    int64         // connections accepted from one node's client before T0, at most
	rssBeforeKB int64         // the child's VmRSS when its watch synced (syncedKB)
	rssKB       int64         // the child's VmRSS after idleWindow, before the stop
	heapBytes   int64         // the child's live heap growth over the baseline
}

// endpointCount is what one endpoint (healthz or metrics) was asked.
type endpointCount struct {
	requests    int64
	maxPerNode  int64
	beforeSync  int64 // requests served before the node's scripted sync
	maxInFlight int64
	// lastFirst is when the last node was first asked, after T0: the
	// baseline's end. A node first asked after its sync cannot be
	// confirmed by healthz alone until its next sync.
	lastFirst  time.Duration
	firstFirst time.Duration // when the first node was first asked, after T0: the node list read before
	firstLate  int64         // nodes first asked after their sync
}

// perNode is the mean number of requests per node.
func (c endpointCount) perNode(nodes int) float64 {
	return float64(c.requests) / float64(max(nodes, 1))
}

// describe is the count as the report and the progress line print it.
func (c endpointCount) describe(name string, nodes int) string {
	return fmt.Sprintf("%s %d requests (%.2f per node, at most %d; %d before the node's sync), %d in flight at most; nodes first asked from T0+%s to T0+%s s, %d after their sync",
		name, c.requests, c.perNode(nodes), c.maxPerNode, c.beforeSync, c.maxInFlight, secs(c.firstFirst), secs(c.lastFirst), c.firstLate)
}

// fanoutServer counts one endpoint's requests per node.
type fanoutServer struct {
	t0                   *atomic.Int64  // unix ns
	firstAt              []atomic.Int64 // unix ns of each node's first request
	firstLate            atomic.Int64
	perNode              []atomic.Int64
	requests, beforeSync atomic.Int64
	inFlight, most       atomic.Int64
}

// begin counts a request to node i (-1: not a simulated node) and returns
// its end.
func (s *fanoutServer) begin(i int, synced bool, nodeInFlight []atomic.Int64, nodeMost *atomic.Int64) func() {
	s.requests.Add(1)
	raise(&s.most, s.inFlight.Add(1))
	if i < 0 || i >= len(s.perNode) {
		return func() { s.inFlight.Add(-1) }
	}
	if s.perNode[i].Add(1) == 1 {
		s.firstAt[i].Store(time.Now().UnixNano())
		if synced {
			s.firstLate.Add(1)
		}
	}
	raise(nodeMost, nodeInFlight[i].Add(1))
	return func() {
		nodeInFlight[i].Add(-1)
		s.inFlight.Add(-1)
	}
}

func (s *fanoutServer) count() endpointCount {
	c := endpointCount{requests: s.requests.Load(), beforeSync: s.beforeSync.Load(), maxInFlight: s.most.Load(), firstLate: s.firstLate.Load()}
	for i := range s.perNode {
		c.maxPerNode = max(c.maxPerNode, s.perNode[i].Load())
		if at := s.firstAt[i].Load(); at != 0 {
			d := time.Duration(at - s.t0.Load())
			c.lastFirst = max(c.lastFirst, d)
			if c.firstFirst == 0 || d < c.firstFirst {
				c.firstFirst = d
			}
		}
	}
	return c
}

// raise sets m to n when n is larger.
func raise(m *atomic.Int64, n int64) {
	for {
		old := m.Load()
		if n <= old || m.CompareAndSwap(old, n) {
			return
		}
	}
}

// childReport is the child's answer, one JSON line.
type childReport struct {
	ConfirmedAt int64  `json:"confirmedAt"` // unix ns; 0 when not confirmed
	RSSKB       int64  `json:"rssKB"`
	SyncedKB    int64  `json:"syncedKB"` // VmRSS before the stop: fake API, informers, node list not read yet
	CPUTicks    int64  `json:"cpuTicks"` // user + system, stop request → confirmed, in clock ticks (1/100 s)
	State       string `json:"state"`
	Detail      string `json:"detail"`
}

// nodeAddr is simulated node i's healthz address; nodeIndex inverts it.
func nodeAddr(i int) netip.Addr {
	return netip.AddrFrom4([4]byte{127, 1, byte(i / 250), byte(i%250 + 1)})
}

func nodeIndex(a netip.Addr) int {
	b := a.Unmap().As4()
	return int(b[2])*250 + int(b[3]) - 1
}

// runFanout runs the servers here and the observer in a child; with
// metrics, the observer reads the nodes' metrics too.
func runFanout(nodes int, metrics bool, baseline, idle time.Duration) (*fanoutResult, error) {
	if idle <= 0 {
		idle = baselineIdle
	}
	ln, err := net.Listen("tcp4", "0.0.0.0:0")
	if err != nil {
		return nil, fmt.Errorf("listen for the simulated healthz: %w", err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	var t0 atomic.Int64 // unix ns; 0 until set
	syncAt := func(i int) time.Time {
		return time.Unix(0, t0.Load()).Add(firstSync + time.Duration(i)*syncSpan/time.Duration(max(nodes-1, 1)))
	}
	// Before its scripted sync, a node reports the sync it made before
	// the child started, from the baseline before T0 on.
	preSync := time.Now().Add(-5 * time.Second)
	var early atomic.Int64 // healthz requests before T0 (the baseline while serving)
	asked := make([]atomic.Bool, nodes)
	var askedNodes atomic.Int64
	// nodeOf is the simulated node a request reached, -1 when none, and
	// its last sync at now; before T0, the node is counted in early.
	nodeOf := func(r *http.Request, now time.Time) (int, time.Time, bool) {
		la, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
		ap, err := netip.ParseAddrPort(la.String())
		if err != nil {
			return -1, time.Time{}, false
		}
		i := nodeIndex(ap.Addr())
		if i < 0 || i >= nodes {
			return -1, time.Time{}, false
		}
		last, synced := preSync, false
		if t0.Load() == 0 {
			return i, last, false
		}
		if s := syncAt(i); !now.Before(s) {
			last, synced = s, true
		}
		return i, last, synced
	}
	nodeInFlight := make([]atomic.Int64, nodes)
	var nodeMost, bothInFlight, bothMost atomic.Int64
	hz := &fanoutServer{t0: &t0, perNode: make([]atomic.Int64, nodes), firstAt: make([]atomic.Int64, nodes)}
	var conns, maxConns atomic.Int64
	connsOf := make([]atomic.Int64, nodes)
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, ConnState: func(c net.Conn, st http.ConnState) {
		if st != http.StateNew || t0.Load() != 0 {
			return
		}
		conns.Add(1)
		if ap, err := netip.ParseAddrPort(c.LocalAddr().String()); err == nil {
			if i := nodeIndex(ap.Addr()); i >= 0 && i < nodes {
				raise(&maxConns, connsOf[i].Add(1))
			}
		}
	}, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := time.Now()
		i, last, synced := nodeOf(r, now)
		if i >= 0 && t0.Load() == 0 {
			early.Add(1)
			if !asked[i].Swap(true) {
				askedNodes.Add(1)
			}
			writeHealthz(w, now, last)
			return
		}
		defer hz.begin(i, synced, nodeInFlight, &nodeMost)()
		raise(&bothMost, bothInFlight.Add(1))
		defer bothInFlight.Add(-1)
		if i < 0 {
			http.Error(w, "not yet", http.StatusServiceUnavailable)
			return
		}
		if !synced {
			hz.beforeSync.Add(1)
		}
		writeHealthz(w, now, last)
	})}
	go srv.Serve(ln)
	defer srv.Close()

	mport := 0
	mx := &fanoutServer{t0: &t0, perNode: make([]atomic.Int64, nodes), firstAt: make([]atomic.Int64, nodes)}
	if metrics {
		mln, err := net.Listen("tcp4", "0.0.0.0:0")
		if err != nil {
			return nil, fmt.Errorf("listen for the simulated metrics: %w", err)
		}
		mport = mln.Addr().(*net.TCPAddr).Port
		started := float64(time.Now().Add(-time.Hour).UnixNano()) / 1e9 // every node's kube-proxy, long before any stamp
		head, tail := metricsFiller("go_memstats_by_size_allocated_bytes", metricsPadding/2), metricsFiller("rest_client_request_duration_seconds", metricsPadding/2)
		msrv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			now := time.Now()
			i, last, synced := nodeOf(r, now)
			if t0.Load() == 0 {
				i = -1 // the observer reads no metrics while serving
			}
			defer mx.begin(i, synced, nodeInFlight, &nodeMost)()
			raise(&bothMost, bothInFlight.Add(1))
			defer bothInFlight.Add(-1)
			if i < 0 {
				http.Error(w, "not yet", http.StatusServiceUnavailable)
				return
			}
			pending := 0
			if !synced {
				mx.beforeSync.Add(1)
				pending = 1
			}
			w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
			bw := bufio.NewWriterSize(w, 4<<10)
			bw.WriteString(head)
			fmt.Fprintf(bw, "# TYPE kubeproxy_sync_proxy_rules_endpoint_changes_pending gauge\nkubeproxy_sync_proxy_rules_endpoint_changes_pending %d\n", pending)
			fmt.Fprintf(bw, "# TYPE kubeproxy_sync_proxy_rules_last_timestamp_seconds gauge\nkubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family=\"IPv4\"} %.6f\n",
				float64(last.Add(20*time.Microsecond).UnixNano())/1e9)
			fmt.Fprintf(bw, "# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds %.2f\n", started)
			bw.WriteString(tail)
			bw.Flush()
		})}
		go msrv.Serve(mln)
		defer msrv.Close()
	}

	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find own executable for the fan-out child: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second+2*baselineSpan(nodes, baseline)+idleSettle+idle)
	defer cancel()
	cmd := exec.CommandContext(ctx, self)
	cmd.Env = append(os.Environ(), childEnv+"=fanout", "HAPSUPER_BENCH_NODES="+strconv.Itoa(nodes), "HAPSUPER_BENCH_PORT="+strconv.Itoa(port),
		"HAPSUPER_BENCH_METRICS_PORT="+strconv.Itoa(mport), "HAPSUPER_BENCH_BASELINE="+baseline.String())
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("fan-out child stdin: %w", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("fan-out child stdout: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start fan-out child: %w", err)
	}
	defer cmd.Wait()
	defer cancel()
	sc := bufio.NewScanner(stdout)
	if dir := os.Getenv("HAPSUPER_BENCH_PROFILE"); dir != "" {
		if f, err := os.Create(filepath.Join(dir, "fanout-server-cpu.pprof")); err == nil && pprof.StartCPUProfile(f) == nil {
			defer f.Close()
			defer pprof.StopCPUProfile()
		}
	}
	if !sc.Scan() || sc.Text() != "synced" {
		return nil, fmt.Errorf("fan-out child did not report its watch synced (%q)", sc.Text())
	}
	// With the baseline, every node asked once first; then, with it or
	// without, the observer's cost while serving over a window.
	began := time.Now()
	span := baselineSpan(nodes, baseline)
	for askedNodes.Load() < int64(nodes) && baseline > 0 {
		if time.Since(began) > span+30*time.Second {
			return nil, fmt.Errorf("fan-out: the baseline asked %d of %d nodes in %s (period %s)", askedNodes.Load(), nodes, time.Since(began).Round(time.Second), span)
		}
		time.Sleep(100 * time.Millisecond)
	}
	cost := &baselineCost{period: baseline, covered: time.Since(began)}
	// The first pass's end returns free memory once (a full collection,
	// routing/baseline.go): the window starts after it.
	time.Sleep(idleSettle)
	before := early.Load()
	fmt.Fprintf(stdin, "%d\n", idle.Nanoseconds())
	if !sc.Scan() {
		return nil, fmt.Errorf("fan-out child ended without its idle figures")
	}
	var cpuNS int64
	if _, err := fmt.Sscanf(sc.Text(), "idle %d %d %d %d", &cpuNS, &cost.rssBeforeKB, &cost.rssKB, &cost.heapBytes); err != nil {
		return nil, fmt.Errorf("read the fan-out child's idle figures %q: %w", sc.Text(), err)
	}
	cost.idleWindow, cost.idleCPU, cost.idleReqs = idle, time.Duration(cpuNS), early.Load()-before
	at := time.Now().Add(200 * time.Millisecond)
	t0.Store(at.UnixNano())
	fmt.Fprintf(stdin, "%d\n", at.UnixNano())
	if !sc.Scan() {
		return nil, fmt.Errorf("fan-out child ended without a report")
	}
	var rep childReport
	if err := json.Unmarshal(sc.Bytes(), &rep); err != nil {
		return nil, fmt.Errorf("read fan-out child report %q: %w", sc.Text(), err)
	}
	if rep.ConfirmedAt == 0 {
		return nil, fmt.Errorf("fan-out: the observer never confirmed (%s; child RSS %.1f MB before the stop, %.1f MB 15 s after): %s: %.300s",
			hz.count().describe("healthz", nodes), float64(rep.SyncedKB)/1024, float64(rep.RSSKB)/1024, rep.State, rep.Detail)
	}
	return &fanoutResult{
		nodes:        nodes,
		metrics:      metrics,
		confirmAfter: time.Unix(0, rep.ConfirmedAt).Sub(syncAt(nodes - 1)),
		healthz:      hz.count(),
		metricsReqs:  mx.count(),
		maxInFlight:  bothMost.Load(),
		maxPerNode:   nodeMost.Load(),
		rssKB:        rep.RSSKB,
		cpu:          time.Duration(rep.CPUTicks) * 10 * time.Millisecond,
		syncedKB:     rep.SyncedKB,
		baseline:     withCounts(cost, early.Load(), conns.Load(), maxConns.Load()),
	}, nil
}

// withCounts fills c's counts; nil stays nil.
func withCounts(c *baselineCost, requests, conns, maxConns int64) *baselineCost {
	if c != nil {
		c.requests, c.conns, c.maxConns = requests, conns, maxConns
	}
	return c
}

// baselineIdle is the default window over which the baseline's cost while
// serving is measured (-fanout-idle), idleSettle after every node was
// asked.
const (
	baselineIdle = 20 * time.Second
	idleSettle   = 5 * time.Second
)

// baselineSpan is how long the observer's baseline takes to ask every
// node: its period, longer where the nodes are more than 50 a second.
func baselineSpan(nodes int, period time.Duration) time.Duration {
	if period <= 0 {
		return 0
	}
	return max(period, time.Duration(nodes)*time.Second/50)
}

// writeHealthz writes a simulated kube-proxy's healthz answer at now, its
// last IPv4 sync at last.
func writeHealthz(w http.ResponseWriter, now, last time.Time) {
	fmt.Fprintf(w, `{"lastUpdated":%q,"currentTime":%q,"nodeEligible":true,"healthy":true,"status":{"IPv4":{"lastUpdated":%q,"healthy":true}}}`,
		now.Format(time.RFC3339Nano), now.Format(time.RFC3339Nano), last.Format(time.RFC3339Nano))
}

// metricsFiller is about size bytes of histogram samples of family, as a
// kube-proxy's /metrics holds around the families the client reads.
func metricsFiller(family string, size int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# HELP %s Filler.\n# TYPE %s histogram\n", family, family)
	for i := 0; b.Len() < size; i++ {
		fmt.Fprintf(&b, "%s_bucket{code=\"200\",verb=\"GET\",le=\"%d\"} %d\n", family, i, i*7)
	}
	return b.String()
}

// childMode runs a child part when this process is one, and says so.
func childMode() bool {
	switch os.Getenv(childEnv) {
	case "":
		return false
	case "fanout":
		if err := fanoutChild(); err != nil {
			fmt.Fprintln(os.Stderr, "rollout fan-out child:", err)
			os.Exit(1)
		}
		return true
	}
	fmt.Fprintln(os.Stderr, "rollout: unknown", childEnv)
	os.Exit(2)
	return true
}

// fanoutChild: a fake API with N nodes and the pod listed ready beside
// another ready endpoint; report "synced"; at T0 (read from stdin) mark
// the pod deleting and request the stop, withdraw it endpointsLag later;
// report when the verdict is withdrawn.
func fanoutChild() error {
	if os.Getenv("HAPSUPER_BENCH_PROFILE") != "" {
		runtime.MemProfileRate = profileHeapRate // before anything it profiles is allocated
	}
	nodes, _ := strconv.Atoi(os.Getenv("HAPSUPER_BENCH_NODES"))
	port, _ := strconv.Atoi(os.Getenv("HAPSUPER_BENCH_PORT"))
	mport, _ := strconv.Atoi(os.Getenv("HAPSUPER_BENCH_METRICS_PORT"))
	baseline, _ := time.ParseDuration(os.Getenv("HAPSUPER_BENCH_BASELINE"))
	const ns = "default"
	// The simple tracker: the fake API lives in the measured process, and
	// NewClientset's field-managing tracker parses the API's OpenAPI schema
	// into about 1.2 MB of live heap that the observer, talking to an API
	// server, does not have, and that the RSS growth counts once more.
	client := fake.NewSimpleClientset()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	api := &pagedNodes{Client: kubefake.New(client), nodes: nodes, node: fanoutNode}
	if err := fakeapi.AddPod(ctx, client, ns); err != nil {
		return err
	}
	obs, err := routing.New(routing.Config{
		Mode: routing.ModeKubeProxy, HealthzPort: port, MetricsPort: mport, Identity: fakeapi.Identity(ns),
		BaselinePeriod: baseline,
	}, api, slog.New(slog.DiscardHandler))
	if err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- obs.Run(ctx) }()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.HasPrefix(obs.Routing(time.Now()).Detail(), "routed here in the API") {
		if time.Now().After(deadline) {
			return fmt.Errorf("observer not synced after 20s: %+v", obs.Routing(time.Now()))
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Free heap pages go back to the system first, as the runtime's
	// scavenger returns them within minutes in a pod that serves: the
	// growth is then what the confirmation needs, not a function of how
	// much of the setup's garbage was still resident.
	debug.FreeOSMemory()
	syncedKB := harness.StatusKB(os.Getpid(), "VmRSS")
	heapAtStop := liveHeap()
	stopProfile, heapProfile := func() {}, func(string) {}
	if dir := os.Getenv("HAPSUPER_BENCH_PROFILE"); dir != "" {
		if heapProfile, stopProfile, err = profileFanout(dir); err != nil {
			return err
		}
	}
	fmt.Println("synced")
	{
		// While serving (with the baseline, once every node was asked):
		// the parent says for how long to measure what it costs.
		var window int64
		if _, err := fmt.Fscan(os.Stdin, &window); err != nil {
			return fmt.Errorf("read the idle window: %w", err)
		}
		cpu := cpuNanos(os.Getpid())
		time.Sleep(time.Duration(window))
		cpu = cpuNanos(os.Getpid()) - cpu
		// Free pages back first, as at the sync: a pod that serves for
		// minutes has had them returned by the scavenger.
		debug.FreeOSMemory()
		rss := harness.StatusKB(os.Getpid(), "VmRSS")
		heap := liveHeap()
		heapProfile("fanout-heap-serving.pprof")
		fmt.Printf("idle %d %d %d %d\n", cpu, syncedKB, rss, heap-heapAtStop)
		syncedKB, heapAtStop = rss, heap
	}
	var at int64
	if _, err := fmt.Fscan(os.Stdin, &at); err != nil {
		return fmt.Errorf("read T0: %w", err)
	}
	time.Sleep(time.Until(time.Unix(0, at)))
	ticks := harness.CPUTicks(os.Getpid())
	// As in a cluster: the pod's deletion, seen by the kubelet (the stop
	// request) and by the EndpointSlice controller, which withdraws the pod
	// endpointsLag later.
	if err := fakeapi.MarkDeleting(ctx, client, ns, 30); err != nil {
		return err
	}
	obs.StopRequested(time.Now())
	time.Sleep(endpointsLag)
	if _, err := client.DiscoveryV1().EndpointSlices(ns).Update(ctx, fakeapi.PodSlice(ns, false), metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("withdraw the pod: %w", err)
	}
	rep := childReport{SyncedKB: syncedKB}
	end := time.Now().Add(15 * time.Second)
	for time.Now().Before(end) {
		v := obs.Routing(time.Now())
		rep.State, rep.Detail = string(v.State), v.Detail()
		if v.State == drain.RoutingWithdrawn {
			rep.ConfirmedAt = time.Now().UnixNano()
			break
		}
		time.Sleep(confirmCheck)
	}
	rep.RSSKB = harness.StatusKB(os.Getpid(), "VmRSS")
	threads := harness.StatusKB(os.Getpid(), "Threads") // a count, read as the kB fields are
	rep.CPUTicks = harness.CPUTicks(os.Getpid()) - ticks
	// What the confirmation keeps, which the RSS growth is about twice
	// (the collector lets the heap grow to twice what is live, GOGC=100)
	// plus what was live at the stop: read after the figures above, as
	// it collects.
	heapEnd := liveHeap()
	fmt.Fprintf(os.Stderr, "  fan-out child: live heap %.1f MB at the stop, %.1f MB at the end: %+.1f MB (%.0f bytes a node); %d threads once confirmed; GOGC %q, GOMEMLIMIT %q\n",
		float64(heapAtStop)/(1<<20), float64(heapEnd)/(1<<20), float64(heapEnd-heapAtStop)/(1<<20),
		float64(heapEnd-heapAtStop)/float64(max(nodes, 1)), threads, os.Getenv("GOGC"), os.Getenv("GOMEMLIMIT"))
	stopProfile()
	cancel()
	<-done
	return json.NewEncoder(os.Stdout).Encode(rep)
}

// cpuNanos is the CPU time pid's threads ran, in ns, from
// /proc/<pid>/task/*/schedstat (/proc/<pid>/stat counts 10 ms ticks: an
// idle observer runs a few of them a second).
func cpuNanos(pid int) int64 {
	var sum int64
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue
		}
		if f := strings.Fields(string(b)); len(f) > 0 {
			n, _ := strconv.ParseInt(f[0], 10, 64)
			sum += n
		}
	}
	return sum
}

// liveHeap is the heap in use after a collection, in bytes.
func liveHeap() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// pagedNodes is the fake API with the node list served as an API server
// serves it, a page of opts.Limit nodes at a time: client-go's fake
// clientset ignores the limit and returns every node at once, each
// copied, a heap peak of 20-30 MB at 5,000 nodes, at the stop and at each
// relist, that the observer, reading nodePageSize nodes a page, does not
// have in a cluster. Each page's nodes are built when it is asked for,
// from their index: the API's own copy of the nodes, 5-7 MB at 5,000
// nodes, lives in an API server, not in the observer's process, where it
// would be scanned by each collection and, live, would let the heap grow
// by as much again before the next (GOGC 100). It serves no other
// selection of nodes.
type pagedNodes struct {
	*kubefake.Client
	nodes int
	node  func(i int) corev1.Node
}

// fanoutNode is the fan-out's node i: its name and its InternalIP.
func fanoutNode(i int) corev1.Node {
	return corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-%d", i)},
		Status:     corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: nodeAddr(i).String()}}},
	}
}

func (p *pagedNodes) ListNodes(_ context.Context, opts metav1.ListOptions) (*corev1.NodeList, error) {
	if opts.FieldSelector != "" || opts.LabelSelector != "" {
		return nil, fmt.Errorf("the fan-out's API lists all nodes only, not %q %q", opts.FieldSelector, opts.LabelSelector)
	}
	start := 0
	if opts.Continue != "" {
		var err error
		if start, err = strconv.Atoi(opts.Continue); err != nil || start < 0 || start > p.nodes {
			return nil, fmt.Errorf("continue token %q: not one this API gave", opts.Continue)
		}
	}
	end := p.nodes
	if opts.Limit > 0 {
		end = min(end, start+int(opts.Limit))
	}
	list := &corev1.NodeList{Items: make([]corev1.Node, end-start)}
	for i := range list.Items {
		list.Items[i] = p.node(start + i)
	}
	if end < p.nodes {
		list.Continue = strconv.Itoa(end)
	}
	return list, nil
}

// onOff names a switch.
func onOff(on bool) string {
	if on {
		return "on"
	}
	return "off"
}

// profileHeapRate is the heap profile's sampling rate in a profiled
// child: one sample per 4 KB allocated, not the runtime's 512 KB, so that
// a node's few hundred bytes show up where they are allocated.
const profileHeapRate = 4 << 10

// profileFanout writes the child's heap once its watch synced
// (fanout-heap-stop.pprof), its CPU profile from then on, its heap when
// heap is called (fanout-heap-serving.pprof: after the cost while serving
// was measured, every node's kept connection open), and its heap again
// when stop is called (fanout-heap.pprof; `go tool pprof
// -sample_index=inuse_space -base fanout-heap-stop.pprof` shows what the
// baseline or the confirmation kept), to dir (HAPSUPER_BENCH_PROFILE: a
// run looked into, not the figures: the finer sampling costs CPU).
func profileFanout(dir string) (heap func(name string), stop func(), err error) {
	writeHeap := func(name string) {
		runtime.GC()
		if heap, err := os.Create(filepath.Join(dir, name)); err == nil {
			pprof.Lookup("allocs").WriteTo(heap, 0)
			heap.Close()
		}
	}
	writeHeap("fanout-heap-stop.pprof")
	cpu, err := os.Create(filepath.Join(dir, "fanout-cpu.pprof"))
	if err != nil {
		return nil, nil, fmt.Errorf("fan-out profile: %w", err)
	}
	if err := pprof.StartCPUProfile(cpu); err != nil {
		cpu.Close()
		return nil, nil, fmt.Errorf("fan-out profile: %w", err)
	}
	return writeHeap, func() {
		pprof.StopCPUProfile()
		cpu.Close()
		writeHeap("fanout-heap.pprof")
	}, nil
}
