package routing

import (
	"context"
	"errors"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/hapsuper/hapsuper/routing/kube/kubefake"
)

// refused is the error a request to an apiserver that is not listening
// fails with.
var refused = &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}

// While the apiserver refuses (restarting), the request is sent again
// 100 ms, 200 ms, … then every second, and the first answer is returned:
// the reflector's own backoff, which grows to 30–60 s and resets only
// after two minutes, never sees the refusals.
func TestRetryRefused(t *testing.T) {
	if !utilnet.IsConnectionRefused(refused) {
		t.Fatal("the test's error is not a refused connection to client-go")
	}
	clk := testingclock.NewFakeClock(t0)
	calls := 0
	var waits []time.Duration
	after := func(d time.Duration) <-chan time.Time {
		waits = append(waits, d)
		ch := make(chan time.Time, 1)
		ch <- clk.Now().Add(d)
		return ch
	}
	v, err := retryRefused(t.Context(), after, func() (int, error) {
		calls++
		if calls <= 6 {
			return 0, refused
		}
		return 42, nil
	})
	if err != nil || v != 42 || calls != 7 {
		t.Fatalf("retryRefused = %d, %v after %d calls; want 42 after 7", v, err, calls)
	}
	want := []time.Duration{100 * ms, 200 * ms, 400 * ms, 800 * ms, time.Second, time.Second}
	if len(waits) != len(want) {
		t.Fatalf("waits %v, want %v", waits, want)
	}
	for i := range want {
		if waits[i] != want[i] {
			t.Fatalf("waits %v, want %v", waits, want)
		}
	}
}

// Any other error goes to the reflector at once (its backoff is for an
// apiserver that answers: 429s, errors), and so does the last refusal
// once the informer is stopped.
func TestRetryRefusedGivesUp(t *testing.T) {
	other := errors.New("the server has asked for the client to provide credentials")
	calls := 0
	_, err := retryRefused(t.Context(), time.After, func() (int, error) { calls++; return 0, other })
	if !errors.Is(err, other) || calls != 1 {
		t.Fatalf("err = %v after %d calls, want the error after 1", err, calls)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	calls = 0
	_, err = retryRefused(ctx, time.After, func() (int, error) { calls++; return 0, refused })
	if !utilnet.IsConnectionRefused(err) || calls != 1 {
		t.Fatalf("err = %v after %d calls, want the refusal after 1", err, calls)
	}
}

// The observer's informers go through it: a list and a watch of
// EndpointSlices the apiserver refuses three times each return the
// answer, not the refusal.
func TestNamespaceListWatchRetriesRefused(t *testing.T) {
	client := kubefake.New(fake.NewClientset())
	lists, watches := 0, 0
	listSlices := func(ctx context.Context, ns string, opts metav1.ListOptions) (*discovery.EndpointSliceList, error) {
		lists++
		if lists <= 3 {
			return nil, refused
		}
		return client.ListEndpointSlices(ctx, ns, opts)
	}
	watchSlices := func(ctx context.Context, ns string, opts metav1.ListOptions) (watch.Interface, error) {
		watches++
		if watches <= 3 {
			return nil, refused
		}
		return watch.NewFake(), nil
	}
	lw := namespaceListWatch("default", listSlices, watchSlices)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if l, err := lw.ListWithContext(ctx, metav1.ListOptions{}); err != nil || l == nil || lists != 4 {
		t.Fatalf("list = %v, %v after %d attempts; want the list after 4", l, err, lists)
	}
	w, err := lw.WatchWithContext(ctx, metav1.ListOptions{})
	if err != nil || w == nil || watches != 4 {
		t.Fatalf("watch = %v, %v after %d attempts; want the watch after 4", w, err, watches)
	}
	w.Stop()
}
