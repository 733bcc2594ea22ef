// Command slicewatch measures routing's EndpointSlice watch in a namespace
// of many slices: how long the initial list takes to sync, what the cache
// adds to the process (RSS and Go heap), how long from a change of the
// pod's slice to the verdict that shows it, and how long a Routing call
// (what the supervisor's loop does on every poll) waits meanwhile.
//
//	cd bench && go run ./slicewatch [-slices 10000] [-per-service 10] [-changes 200] [-churn 500]
//
// The API is client-go's fake clientset in this process, so the figures
// are routing's own work, without the network or an apiserver. The fake
// holds its objects before the observer starts: the growth measured from
// then on is the observer's (informer caches, trimmed slices, its state).
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/hapsuper/hapsuper/bench/fakeapi"
	"github.com/hapsuper/hapsuper/drain"
	"github.com/hapsuper/hapsuper/routing"
	"github.com/hapsuper/hapsuper/routing/kube/kubefake"
	"github.com/hapsuper/hapsuper/test/harness"
)

const ns = "bench"

func main() {
	n := flag.Int("slices", 10000, "EndpointSlices in the namespace, the pod's own included")
	per := flag.Int("per-service", 10, "slices per other Service")
	changes := flag.Int("changes", 200, "changes of the pod's slice to time")
	churn := flag.Int("churn", 500, "updates per second of other Services' slices while the changes are timed")
	flag.Parse()
	if err := run(*n, *per, *changes, *churn); err != nil {
		fmt.Fprintln(os.Stderr, "slicewatch:", err)
		os.Exit(1)
	}
}

func run(n, per, changes, churn int) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := fake.NewSimpleClientset() // NewClientset's field management takes ~20 ms per Update: it would time itself
	if err := populate(ctx, client, n, per); err != nil {
		return err
	}
	settle()
	rss0, heap0 := harness.StatusKB(os.Getpid(), "VmRSS"), heapInUse()

	obs, err := routing.New(routing.Config{
		Mode:     routing.ModeEndpointSlices,
		Identity: fakeapi.Identity(ns),
	}, kubefake.New(client), slog.New(slog.DiscardHandler))
	if err != nil {
		return err
	}
	done := make(chan error, 1)
	started := time.Now()
	go func() { done <- obs.Run(ctx) }()
	defer func() { cancel(); <-done }()

	// The loop's view while the initial list is applied.
	syncWaits := &waits{}
	stopProbe := syncWaits.probe(obs)
	if err := until(obs, 120*time.Second, func(r drain.Routing) bool {
		return r.State == drain.RoutingPending && strings.HasPrefix(r.Detail(), "routed here in the API")
	}); err != nil {
		return fmt.Errorf("initial sync: %w", err)
	}
	syncTook := time.Since(started)
	stopProbe()
	settle()
	rss1, heap1 := harness.StatusKB(os.Getpid(), "VmRSS"), heapInUse()

	// Changes of the pod's slice, with other slices churning.
	var churned atomic.Int64
	churnDone := make(chan struct{})
	churnCtx, stopChurn := context.WithCancel(ctx)
	go func() {
		defer close(churnDone)
		churnSlices(churnCtx, client, n, per, churn, &churned)
	}()
	changeWaits := &waits{}
	stopProbe = changeWaits.probe(obs)
	var lat, upd []time.Duration
	changing := time.Now()
	for i := range changes {
		ready := i%2 == 1
		at := time.Now()
		if _, err := client.DiscoveryV1().EndpointSlices(ns).Update(ctx, fakeapi.PodSlice(ns, ready), metav1.UpdateOptions{}); err != nil {
			stopChurn()
			return fmt.Errorf("change %d: %w", i, err)
		}
		upd = append(upd, time.Since(at))
		want := drain.RoutingWithdrawn
		if ready {
			want = drain.RoutingPending
		}
		if err := until(obs, 10*time.Second, func(r drain.Routing) bool { return r.State == want }); err != nil {
			stopChurn()
			return fmt.Errorf("change %d: %w", i, err)
		}
		lat = append(lat, time.Since(at))
		time.Sleep(5 * time.Millisecond)
	}
	stopProbe()
	stopChurn()
	<-churnDone
	changed := time.Since(changing)

	fmt.Printf("| %d EndpointSlices (%d per other Service), routing endpointslices, fake API in process | value |\n|---|---|\n", n, per)
	fmt.Printf("| initial list applied (watch synced, verdict out) | %s |\n", syncTook.Round(time.Millisecond))
	fmt.Printf("| RSS growth, observer started → synced (target ≤ 10 MB) | %.1f MB |\n", float64(rss1-rss0)/1024)
	fmt.Printf("| Go heap in use growth | %.1f MB |\n", float64(heap1-heap0)/(1<<20))
	fmt.Printf("| slice change (Update call) → verdict, p50 / p99 / max of %d (target p99 ≤ 10 ms) | %s / %s / %s |\n",
		len(lat), pct(lat, 50), pct(lat, 99), pct(lat, 100))
	fmt.Printf("| of which the fake API's Update call, p50 / p99 | %s / %s |\n", pct(upd, 50), pct(upd, 99))
	fmt.Printf("| other slices updated meanwhile | %d (%.0f/s) |\n", churned.Load(), float64(churned.Load())/changed.Seconds())
	fmt.Printf("| Routing call during the initial list, p99 / max of %d | %s / %s |\n", len(syncWaits.d), pct(syncWaits.d, 99), pct(syncWaits.d, 100))
	fmt.Printf("| Routing call during the changes, p99 / max of %d | %s / %s |\n", len(changeWaits.d), pct(changeWaits.d, 99), pct(changeWaits.d, 100))
	return nil
}

// populate fills the fake API: the pod, its Service and slice (the pod
// ready beside another ready endpoint), and Services of per slices each
// until n slices in all.
func populate(ctx context.Context, c *fake.Clientset, n, per int) error {
	if err := fakeapi.AddPod(ctx, c, ns); err != nil {
		return err
	}
	for i := range n - 1 {
		svc := "svc-" + strconv.Itoa(i/per)
		if i%per == 0 {
			if err := fakeapi.AddService(ctx, c, ns, svc); err != nil {
				return err
			}
		}
		if _, err := c.DiscoveryV1().EndpointSlices(ns).Create(ctx, otherSlice(i, per, 0), metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	return nil
}

// otherSlice is slice i of another Service: 10 ready endpoints of other
// pods; gen changes the last one's address, for the churn.
func otherSlice(i, per, gen int) *discovery.EndpointSlice {
	s := &discovery.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "slice-" + strconv.Itoa(i), Namespace: ns, Labels: map[string]string{discovery.LabelServiceName: "svc-" + strconv.Itoa(i/per)}},
		AddressType: discovery.AddressTypeIPv4,
		Ports:       []discovery.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080)}},
	}
	for j := range 10 {
		a := fmt.Sprintf("10.%d.%d.%d", 1+i/250%200, i%250, j+1)
		if j == 9 {
			a = fmt.Sprintf("10.250.%d.%d", gen/250%250, gen%250+1)
		}
		s.Endpoints = append(s.Endpoints, discovery.Endpoint{Addresses: []string{a}, NodeName: ptr.To("node-1"),
			TargetRef:  &corev1.ObjectReference{Kind: "Pod", Name: fmt.Sprintf("p-%d-%d", i, j), Namespace: ns},
			Conditions: discovery.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)}})
	}
	return s
}

// churnSlices updates other Services' slices at rate per second until ctx ends.
func churnSlices(ctx context.Context, c *fake.Clientset, n, per, rate int, count *atomic.Int64) {
	if rate <= 0 {
		return
	}
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if _, err := c.DiscoveryV1().EndpointSlices(ns).Update(ctx, otherSlice(i%(n-1), per, i), metav1.UpdateOptions{}); err == nil {
			count.Add(1)
		}
	}
}

// until polls the verdict every 50 µs until ok accepts it, at most bound.
func until(obs *routing.Observer, bound time.Duration, ok func(drain.Routing) bool) error {
	end := time.Now().Add(bound)
	for {
		r := obs.Routing(time.Now())
		if ok(r) {
			return nil
		}
		if time.Now().After(end) {
			return fmt.Errorf("verdict not reached within %s: %s: %s", bound, r.State, r.Detail())
		}
		time.Sleep(50 * time.Microsecond)
	}
}

// waits records how long Routing calls take, made every millisecond as the
// supervisor's loop makes them on every poll.
type waits struct {
	mu sync.Mutex
	d  []time.Duration
}

func (w *waits) probe(obs *routing.Observer) (stop func()) {
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-quit:
				return
			case <-tick.C:
			}
			t := time.Now()
			obs.Routing(t)
			w.mu.Lock()
			w.d = append(w.d, time.Since(t))
			w.mu.Unlock()
		}
	}()
	return func() { close(quit); <-done }
}

func pct(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := min(len(s)-1, (len(s)*p+99)/100-1)
	return s[max(i, 0)].Round(time.Microsecond)
}

// settle collects garbage and returns free pages, so that RSS is what is
// held.
func settle() {
	runtime.GC()
	debug.FreeOSMemory()
	time.Sleep(100 * time.Millisecond)
}

func heapInUse() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}
