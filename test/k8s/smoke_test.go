// Package k8s_test holds the smoke test of the k8stest harness: it proves
// the harness makes a cluster in which kube-proxy withdraws a deleted pod.
package k8s_test

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hapsuper/hapsuper/test/harness"
	"github.com/hapsuper/hapsuper/test/harness/kube"
	"github.com/hapsuper/hapsuper/test/k8s/k8stest"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// withdrawalBound is how long kube-proxy may take to stop routing to a
// deleted pod. It measured ~10 ms here; the EndpointSlice controller can add
// a one-second retry ("informer cache is out of date").
const withdrawalBound = 3 * time.Second

// A ClusterIP Service with one pod per node: after pod A is deleted (grace
// 60 s, still serving, as during a real termination), every request from
// every node reaches pod B, and each kube-proxy's healthz reports a sync
// after the delete.
func TestHarness_ClusterIPWithdrawal(t *testing.T) {
	for _, mode := range []string{"nftables", "iptables"} {
		t.Run(mode, func(t *testing.T) {
			h := k8stest.Start(t, k8stest.Options{Nodes: 2, ProxyMode: mode})
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()

			// kube.Env's Service needs only the cluster.
			clusterIP, err := (&kube.Env{H: h}).Service(ctx, "web", false, corev1.ServicePort{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)})
			if err != nil {
				t.Fatal(err)
			}
			labels := map[string]string{"app": "web"}
			podA := h.AddPod(t, 1, "web-a", labels)
			podB := h.AddPod(t, 2, "web-b", labels)
			for _, p := range []*k8stest.Pod{podA, podB} {
				p.ServeHTTP(t, 8080, nil)
				if err := h.SetPodReady(ctx, p, true); err != nil {
					t.Fatal(err)
				}
			}
			url := fmt.Sprintf("http://%s/", netip.AddrPortFrom(clusterIP, 80))
			for _, n := range h.Nodes() {
				began := time.Now()
				seen := waitSeen(t, n, url, 10*time.Second, "web-a", "web-b")
				t.Logf("%s reaches both pods through %s after %v (%v)", n.Name, url, time.Since(began).Round(time.Millisecond), seen)
			}

			deleted := time.Now()
			if err := h.DeletePod(ctx, podA, 60*time.Second); err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			for _, n := range h.Nodes() {
				wg.Go(func() {
					took, err := waitOnly(n, url, "web-b", deleted)
					if err != nil {
						t.Errorf("%s: %v", n.Name, err)
						return
					}
					t.Logf("%s: only web-b answers %v after the delete", n.Name, took.Round(time.Millisecond))
				})
				wg.Go(func() {
					took, err := waitSyncAfter(ctx, n, deleted)
					if err != nil {
						t.Errorf("%s: %v", n.Name, err)
						return
					}
					t.Logf("%s: kube-proxy healthz IPv4 lastUpdated %v after the delete", n.Name, took.Round(time.Millisecond))
				})
			}
			wg.Wait()
		})
	}
}

// waitSeen requests url from node n until every one of want has answered
// (none: any pod), bounded by bound, and returns how many answers each pod
// gave.
func waitSeen(t *testing.T, n *k8stest.Node, url string, bound time.Duration, want ...string) map[string]int {
	t.Helper()
	seen := map[string]int{}
	client := n.HTTPClient(time.Second)
	var last harness.Outcome
	for deadline := time.Now().Add(bound); time.Now().Before(deadline); {
		if last = harness.Request(client, n.Name, url); last.Kind != harness.KindOK {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		seen[last.Pod]++
		if !slices.ContainsFunc(want, func(w string) bool { return seen[w] == 0 }) {
			return seen
		}
	}
	t.Fatalf("%s: not every one of %v answered %s within %v: saw %v, last %s", n.Name, want, url, bound, seen, last)
	return nil
}

// waitOnly requests url from node n until 20 consecutive answers come from
// want, and returns how long after since the first of them was sent.
func waitOnly(n *k8stest.Node, url, want string, since time.Time) (time.Duration, error) {
	const streak = 20
	var run int
	var runStart time.Time
	last := map[string]int{}
	client := n.HTTPClient(time.Second)
	for time.Since(since) < withdrawalBound {
		o := harness.Request(client, n.Name, url)
		if o.Kind != harness.KindOK {
			return 0, fmt.Errorf("request %s: %s", url, o)
		}
		last[o.Pod]++
		if o.Pod != want {
			run = 0
			continue
		}
		if run == 0 {
			runStart = o.Sent
		}
		if run++; run == streak {
			return runStart.Sub(since), nil
		}
	}
	return 0, fmt.Errorf("requests still reached other pods %v after the delete: answers %v", withdrawalBound, last)
}

// waitSyncAfter polls node n's kube-proxy healthz until its IPv4 lastUpdated
// is after since.
func waitSyncAfter(ctx context.Context, n *k8stest.Node, since time.Time) (time.Duration, error) {
	var last *k8stest.Healthz
	for time.Since(since) < withdrawalBound {
		hz, err := n.Healthz(ctx)
		if err == nil {
			last = hz
			if v4, ok := hz.Status["IPv4"]; ok && v4.LastUpdated.After(since) {
				return v4.LastUpdated.Sub(since), nil
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return 0, fmt.Errorf("kube-proxy healthz shows no IPv4 sync after the delete within %v: last %+v", withdrawalBound, last)
}
