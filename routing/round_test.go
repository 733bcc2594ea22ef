package routing

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// hangingCheck is a health check node port that accepts and answers
// nothing until released (or the client gives up), counting the requests
// it holds.
type hangingCheck struct {
	release chan struct{}

	mu             sync.Mutex
	inFlight, most int
}

func (h *hangingCheck) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	h.inFlight++
	h.most = max(h.most, h.inFlight)
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		h.inFlight--
		h.mu.Unlock()
	}()
	select {
	case <-h.release:
	case <-r.Context().Done():
	}
}

func (h *hangingCheck) counts() (inFlight, most int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.inFlight, h.most
}

// Four LoadBalancer Services with their own health check node ports on
// the pod's node, none of which answers: the round asks them side by side,
// at most Concurrency at a time, and asks kube-proxy while they hang, so
// a round lasts one request timeout, not four, and kube-proxy's
// confirmation does not wait behind them. Counted, not timed: the checks
// hang until the test has seen them all in flight with kube-proxy asked.
func TestRoundHealthChecksDoNotHoldConfirmation(t *testing.T) {
	const checks = 4
	for _, tc := range []struct {
		concurrency, wantInFlight int
	}{
		{concurrency: 8, wantInFlight: checks},
		{concurrency: 2, wantInFlight: 2},
	} {
		t.Run(fmt.Sprintf("concurrency %d", tc.concurrency), func(t *testing.T) {
			client := fake.NewClientset()
			if err := client.Tracker().Add(node("n1", "10.0.0.1")); err != nil {
				t.Fatal(err)
			}
			o := newTestObserver(t, Config{Mode: ModeKubeProxy, Concurrency: tc.concurrency, RequestTimeout: time.Minute,
				LBHealthCheckWindow: time.Second}, client)
			proxy := &fakeProxy{clk: o.clk, syncs: []time.Time{t0}}
			proxySrv := httptest.NewServer(proxy)
			t.Cleanup(proxySrv.Close)
			o.routes["10.0.0.1:10256"] = proxySrv.Listener.Addr().String()
			hang := &hangingCheck{release: make(chan struct{})}
			hangSrv := httptest.NewServer(hang)
			t.Cleanup(hangSrv.Close)
			t.Cleanup(func() {
				select {
				case <-hang.release:
				default:
					close(hang.release)
				}
			})

			objs := []any{&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: "default"}, Status: corev1.PodStatus{HostIP: "10.0.0.1"}}}
			for i := range checks {
				name := fmt.Sprintf("web%d", i)
				port := int32(31000 + i)
				o.routes[fmt.Sprintf("10.0.0.1:%d", port)] = hangSrv.Listener.Addr().String()
				objs = append(objs, service(name, loadBalancerLocal, func(s *corev1.Service) { s.Spec.HealthCheckNodePort = port }),
					v4(name+"-a", name, mine(readyC), peer("n2", readyC)))
			}
			o.apply(objs...)
			o.clk.Step(10 * time.Second)
			for i := range checks {
				name := fmt.Sprintf("web%d", i)
				o.apply(v4(name+"-a", name, mine(servingTermC), peer("n2", readyC)))
			}
			o.StopRequested(o.clk.Now())

			done := make(chan struct{})
			go func() {
				defer close(done)
				o.rounds(t.Context())
			}()
			// Wait, bounded, for every check the limit allows in flight
			// at once, and kube-proxy asked meanwhile.
			deadline := time.Now().Add(10 * time.Second)
			for {
				inFlight, _ := hang.counts()
				if inFlight == tc.wantInFlight && proxy.requestCount() > 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("after 10s: %d health checks in flight at once (want %d), kube-proxy asked %d times (want 1): the round asks in turn",
						inFlight, tc.wantInFlight, proxy.requestCount())
				}
				time.Sleep(time.Millisecond)
			}
			close(hang.release)
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("the round did not return within 10s of the checks answering")
			}
			if _, most := hang.counts(); most > tc.concurrency {
				t.Errorf("%d health checks in flight at once, concurrency %d", most, tc.concurrency)
			}
		})
	}
}
