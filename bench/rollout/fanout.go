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
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hapsuper/hapsuper/bench/fakeapi"
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
// withdraws the pod in its fake API and requests the stop.

// childEnv selects a child mode of this binary.
const childEnv = "HAPSUPER_BENCH_CHILD"

// Scripted syncs, after T0; the pod is deleted at T0 and withdrawn from
// its EndpointSlice endpointsLag later.
const (
	firstSync    = 400 * time.Millisecond
	syncSpan     = 500 * time.Millisecond
	endpointsLag = 50 * time.Millisecond
)

// fanoutResult is what the fan-out part measured.
type fanoutResult struct {
	nodes        int
	confirmAfter time.Duration // confirmed − last node's sync
	maxInFlight  int64
	requests     int64
	rssKB        int64 // the child's VmRSS once confirmed
	syncedKB     int64 // the child's VmRSS before the stop request
}

// childReport is the child's answer, one JSON line.
type childReport struct {
	ConfirmedAt int64  `json:"confirmedAt"` // unix ns; 0 when not confirmed
	RSSKB       int64  `json:"rssKB"`
	SyncedKB    int64  `json:"syncedKB"` // VmRSS before the stop: fake API, informers, node list not read yet
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

// runFanout runs the server here and the observer in a child.
func runFanout(nodes int) (*fanoutResult, error) {
	ln, err := net.Listen("tcp4", "0.0.0.0:0")
	if err != nil {
		return nil, fmt.Errorf("listen for the simulated healthz: %w", err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	var t0 atomic.Int64 // unix ns; 0 until set
	var inFlight, maxInFlight, requests atomic.Int64
	syncAt := func(i int) time.Time {
		return time.Unix(0, t0.Load()).Add(firstSync + time.Duration(i)*syncSpan/time.Duration(max(nodes-1, 1)))
	}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		requests.Add(1)
		for {
			m := maxInFlight.Load()
			if n <= m || maxInFlight.CompareAndSwap(m, n) {
				break
			}
		}
		la, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
		ap, err := netip.ParseAddrPort(la.String())
		if err != nil || t0.Load() == 0 {
			http.Error(w, "not yet", http.StatusServiceUnavailable)
			return
		}
		now := time.Now()
		last := time.Unix(0, t0.Load()).Add(-5 * time.Second)
		if s := syncAt(nodeIndex(ap.Addr())); !now.Before(s) {
			last = s
		}
		fmt.Fprintf(w, `{"lastUpdated":%q,"currentTime":%q,"nodeEligible":true,"healthy":true,"status":{"IPv4":{"lastUpdated":%q,"healthy":true}}}`,
			now.Format(time.RFC3339Nano), now.Format(time.RFC3339Nano), last.Format(time.RFC3339Nano))
	})}
	go srv.Serve(ln)
	defer srv.Close()

	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find own executable for the fan-out child: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, self)
	cmd.Env = append(os.Environ(), childEnv+"=fanout", "HAPSUPER_BENCH_NODES="+strconv.Itoa(nodes), "HAPSUPER_BENCH_PORT="+strconv.Itoa(port))
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
	if !sc.Scan() || sc.Text() != "synced" {
		return nil, fmt.Errorf("fan-out child did not report its watch synced (%q)", sc.Text())
	}
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
		return nil, fmt.Errorf("fan-out: the observer never confirmed: %s: %s", rep.State, rep.Detail)
	}
	return &fanoutResult{
		nodes:        nodes,
		confirmAfter: time.Unix(0, rep.ConfirmedAt).Sub(syncAt(nodes - 1)),
		maxInFlight:  maxInFlight.Load(),
		requests:     requests.Load(),
		rssKB:        rep.RSSKB,
		syncedKB:     rep.SyncedKB,
	}, nil
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
	nodes, _ := strconv.Atoi(os.Getenv("HAPSUPER_BENCH_NODES"))
	port, _ := strconv.Atoi(os.Getenv("HAPSUPER_BENCH_PORT"))
	const ns = "default"
	client := fake.NewClientset()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for i := range nodes {
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-%d", i)},
			Status:     corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: nodeAddr(i).String()}}},
		}
		if _, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create node %d in the fake API: %w", i, err)
		}
	}
	if err := fakeapi.AddPod(ctx, client, ns); err != nil {
		return err
	}
	obs, err := routing.New(routing.Config{
		Mode: routing.ModeKubeProxy, HealthzPort: port, Identity: fakeapi.Identity(ns),
	}, kubefake.New(client), slog.New(slog.DiscardHandler))
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
	syncedKB := harness.StatusKB(os.Getpid(), "VmRSS")
	fmt.Println("synced")
	var at int64
	if _, err := fmt.Fscan(os.Stdin, &at); err != nil {
		return fmt.Errorf("read T0: %w", err)
	}
	time.Sleep(time.Until(time.Unix(0, at)))
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
		time.Sleep(2 * time.Millisecond)
	}
	rep.RSSKB = harness.StatusKB(os.Getpid(), "VmRSS")
	cancel()
	<-done
	return json.NewEncoder(os.Stdout).Encode(rep)
}
