package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hapsuper/hapsuper/test/harness"
	"github.com/hapsuper/hapsuper/test/k8s/k8stest"
	corev1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
)

// scaleResult is hapsuper's RSS with and without many EndpointSlices in its
// namespace.
type scaleResult struct {
	slices     int
	rssBaseKB  int64 // started with only the benchmark's own slices, watch synced
	rssWithKB  int64 // started after the slices were created, watch synced
	rssWatchKB int64 // the first one, after its watch delivered them
	created    time.Duration
	// Go heap in use (go_memstats_heap_inuse_bytes) of the two, in bytes:
	// what the cache holds, against RSS, which also keeps what the initial
	// list's decoding used until the runtime returns it.
	heapBase, heapWith float64
}

// metricsPort is where the scale check's hapsuper serves /metrics, in its pod.
const metricsPort = 9101

// heapInUse is the line of hapsuper's /metrics read by goHeap.
var heapInUse = regexp.MustCompile(`(?m)^go_memstats_heap_inuse_bytes ([0-9.e+]+)$`)

// goHeap reads the Go heap in use from p's /metrics; 0 when it cannot.
func goHeap(ctx context.Context, p *benchPod) float64 {
	c := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DialContext: p.DialContext, Proxy: nil}}
	resp, err := c.Get(fmt.Sprintf("http://%s/metrics", netip.AddrPortFrom(p.IP, metricsPort)))
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return 0
	}
	m := heapInUse.FindSubmatch(body)
	if m == nil {
		return 0
	}
	v, _ := strconv.ParseFloat(string(m[1]), 64)
	return v
}

// scaleSettle is how long hapsuper runs after its watch synced before its
// RSS is read.
const scaleSettle = 3 * time.Second

// runScale starts hapsuper (routing endpointslices) with the namespace
// as the matrix left it, creates n EndpointSlices of 1 endpoint each for
// n/100 selector-less ClusterIP Services, and starts a second hapsuper.
func (r *runner) runScale(ctx context.Context, n int) (*scaleResult, error) {
	s := strategy{name: "scale", kind: stratHapsuper, routing: "endpointslices", args: []string{"--metrics-addr", fmt.Sprintf(":%d", metricsPort)}}
	labels := map[string]string{"app": "scale"}
	base, err := r.startPod(ctx, 1, "scale-base", s, labels)
	if err != nil {
		return nil, err
	}
	time.Sleep(scaleSettle)
	res := &scaleResult{slices: n, rssBaseKB: harness.StatusKB(base.Pid(), "VmRSS"), heapBase: goHeap(ctx, base)}
	r.printf("  %d slices: hapsuper RSS %.1f MB (Go heap in use %.1f MB)\n", 0, float64(res.rssBaseKB)/1024, res.heapBase/(1<<20))

	began := time.Now()
	if err := createSlices(ctx, r.env.H.Config, n); err != nil {
		return nil, err
	}
	res.created = time.Since(began)
	r.printf("  created %d EndpointSlices in %v\n", n, res.created.Round(100*time.Millisecond))
	with, err := r.startPod(ctx, 2, "scale-with", s, labels)
	if err != nil {
		return nil, err
	}
	time.Sleep(scaleSettle)
	res.rssWithKB, res.heapWith = harness.StatusKB(with.Pid(), "VmRSS"), goHeap(ctx, with)
	res.rssWatchKB = harness.StatusKB(base.Pid(), "VmRSS")
	r.printf("  %d slices: hapsuper RSS %.1f MB (Go heap in use %.1f MB) started after them; %.1f MB watching while they came\n",
		n, float64(res.rssWithKB)/1024, res.heapWith/(1<<20), float64(res.rssWatchKB)/1024)
	base.Kill()
	with.Kill()
	return res, nil
}

// createSlices creates n/100 Services without selector (the EndpointSlice
// controller leaves their slices alone) and 100 slices of one endpoint for
// each, through a client without client-side rate limit.
func createSlices(ctx context.Context, cfg *rest.Config, n int) error {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = -1, 0
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("build API client for the scale check: %w", err)
	}
	ns := k8stest.PodNamespace
	services := max(n/100, 1)
	for i := range services {
		_, err := c.CoreV1().Services(ns).Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("scale-%d", i)},
			Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, Ports: []corev1.ServicePort{{Name: "http", Port: 80}}},
		}, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("create Service scale-%d: %w", i, err)
		}
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	var firstErr atomic.Value
	for range 16 {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n || firstErr.Load() != nil {
					return
				}
				svc := fmt.Sprintf("scale-%d", i%services)
				addr := fmt.Sprintf("10.252.%d.%d", i/250, i%250+1)
				_, err := c.DiscoveryV1().EndpointSlices(ns).Create(ctx, &discovery.EndpointSlice{
					ObjectMeta: metav1.ObjectMeta{
						Name:   fmt.Sprintf("%s-%d", svc, i),
						Labels: map[string]string{discovery.LabelServiceName: svc, discovery.LabelManagedBy: "hapsuper-bench"},
					},
					AddressType: discovery.AddressTypeIPv4,
					Ports:       []discovery.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(corev1.ProtocolTCP)}},
					Endpoints: []discovery.Endpoint{{
						Addresses:  []string{addr},
						NodeName:   ptr.To("node1"),
						Conditions: discovery.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)},
						TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: fmt.Sprintf("scale-pod-%d", i)},
					}},
				}, metav1.CreateOptions{})
				if err != nil {
					firstErr.CompareAndSwap(nil, fmt.Errorf("create EndpointSlice %d: %w", i, err))
					return
				}
			}
		})
	}
	wg.Wait()
	if err, ok := firstErr.Load().(error); ok {
		return err
	}
	return nil
}
