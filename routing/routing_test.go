package routing

import (
	"strings"
	"testing"
	"time"

	"github.com/hapsuper/hapsuper/drain"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/hapsuper/hapsuper/routing/judge"
)

// expect checks the verdict's state and that its detail says every want.
func expect(t *testing.T, got drain.Routing, state drain.RoutingState, want ...string) {
	t.Helper()
	if got.State != state {
		t.Fatalf("routing = %s (%s), want %s", got.State, got.Detail(), state)
	}
	for _, w := range want {
		if !strings.Contains(got.Detail(), w) {
			t.Fatalf("detail %q does not say %q", got.Detail(), w)
		}
	}
}

func TestRoutingWithoutAnswer(t *testing.T) {
	off := newTestObserver(t, Config{Mode: ModeOff}, nil)
	expect(t, off.Routing(off.clk.Now()), drain.RoutingOff)

	o := newTestObserver(t, Config{Mode: ModeEndpointSlices}, nil)
	expect(t, o.Routing(o.clk.Now()), drain.RoutingUnverified, "watch not synced")

	o.apply(service("web"), v4("web-a", "web", peer("n2", readyC)))
	expect(t, o.Routing(o.clk.Now()), drain.RoutingUnverified, "no EndpointSlice lists this pod")

	// kube-proxy programs neither a headless Service nor a slice that
	// another proxy owns.
	other := v4("mesh-a", "mesh", mine(readyC))
	other.Labels[judge.LabelProxyName] = "istio"
	o.apply(service("db", headless), v4("db-a", "db", mine(readyC)), service("mesh"), other)
	expect(t, o.Routing(o.clk.Now()), drain.RoutingUnverified, "no EndpointSlice lists this pod")
}

func TestRoutingEndpointSlicesMode(t *testing.T) {
	o := newTestObserver(t, Config{Mode: ModeEndpointSlices}, nil)
	o.apply(service("web"), service("api"),
		v4("web-a", "web", mine(readyC), peer("n2", readyC)),
		v4("api-a", "api", mine(readyC), peer("n2", readyC)))
	expect(t, o.Routing(o.clk.Now()), drain.RoutingPending, "default/api (IPv4): endpoint ready", "default/web (IPv4): endpoint ready")

	o.clk.Step(ms)
	o.apply(v4("web-a", "web", mine(servingTermC), peer("n2", readyC)))
	expect(t, o.Routing(o.clk.Now()), drain.RoutingPending, "default/api (IPv4): endpoint ready")

	o.apply(v4("api-a", "api", mine(servingTermC), peer("n2", readyC)))
	o.clk.Step(200 * ms)
	expect(t, o.Routing(o.clk.Now()), drain.RoutingWithdrawn, "withdrawn in the API 200ms ago", "kube-proxy not observed")
}

// Withdrawal is not monotonic: when the last ready peer goes, kube-proxy
// puts the serving-terminating endpoint back, and R must start over.
func TestRoutingFallbackAndR(t *testing.T) {
	o := newTestObserver(t, Config{Mode: ModeEndpointSlices}, nil)
	key := judge.PathKey{Service: "web", Family: "IPv4"}
	o.apply(service("web"), v4("web-a", "web", mine(readyC), peer("n2", readyC)))

	o.clk.Step(ms)
	r1 := o.clk.Now()
	o.apply(v4("web-a", "web", mine(servingTermC), peer("n2", readyC)))
	expect(t, o.Routing(o.clk.Now()), drain.RoutingWithdrawn)

	// An unrelated change (a new pod, another slice) does not move R.
	o.clk.Step(ms)
	o.apply(v4("web-a", "web", mine(servingTermC), peer("n2", readyC), ep("10.0.2.2", "n3", "web-2", readyC)),
		v4("web-b", "web", ep("10.0.3.3", "n3", "web-3", readyC)))
	if got := o.since(key); !got.Equal(r1) {
		t.Fatalf("R = %v after an unrelated change, want %v", got, r1)
	}

	// Every peer goes unready: back to pending.
	o.clk.Step(ms)
	o.apply(v4("web-a", "web", mine(servingTermC), peer("n2", servingTermC)), v4("web-b", "web"))
	expect(t, o.Routing(o.clk.Now()), drain.RoutingPending, "kube-proxy falls back to it")

	// A peer is ready again: withdrawn, with a new R.
	o.clk.Step(ms)
	r2 := o.clk.Now()
	o.apply(v4("web-b", "web", ep("10.0.3.3", "n3", "web-3", readyC)))
	expect(t, o.Routing(o.clk.Now()), drain.RoutingWithdrawn)
	if got := o.since(key); !got.Equal(r2) {
		t.Fatalf("R = %v after withdrawing again, want %v", got, r2)
	}
}

func TestRoutingRemoval(t *testing.T) {
	o := newTestObserver(t, Config{Mode: ModeEndpointSlices}, nil)
	o.apply(service("web"), service("api"),
		v4("web-a", "web", mine(servingTermC)), v4("api-a", "api", mine(readyC)))
	expect(t, o.Routing(o.clk.Now()), drain.RoutingPending)

	// The endpoint leaves web's slice; the api Service is deleted.
	o.apply(v4("web-a", "web", peer("n2", servingTermC)))
	o.remove(service("api"), v4("api-a", "api"))
	expect(t, o.Routing(o.clk.Now()), drain.RoutingWithdrawn, "default/api (IPv4)", "default/web (IPv4)")
	for k, p := range o.watch.paths {
		if !p.Withdrawn {
			t.Errorf("%s: %+v", k, p)
		}
	}
}

func TestRoutingKubeProxyBeforeNodes(t *testing.T) {
	ctx := t.Context()
	withdrawnAPI := func(o *testObserver) {
		o.apply(service("web"), v4("web-a", "web", mine(servingTermC), peer("n2", readyC)))
	}

	o := newTestObserver(t, Config{Mode: ModeKubeProxy}, nil)
	withdrawnAPI(o)
	expect(t, o.Routing(o.clk.Now()), drain.RoutingPending, "kube-proxy is asked once the stop is requested")
	o.StopRequested(o.clk.Now())
	expect(t, o.Routing(o.clk.Now()), drain.RoutingPending, "nodes not listed yet")
	o.confirmRound(ctx)
	expect(t, o.Routing(o.clk.Now()), drain.RoutingUnverified, "the node list is empty")

	client := fake.NewClientset()
	client.PrependReactor("list", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "nodes"}, "", nil)
	})
	forbidden := newTestObserver(t, Config{Mode: ModeKubeProxy}, client)
	withdrawnAPI(forbidden)
	forbidden.StopRequested(forbidden.clk.Now())
	forbidden.confirmRound(ctx)
	expect(t, forbidden.Routing(forbidden.clk.Now()), drain.RoutingUnverified, "forbidden", "ClusterRole with list on nodes")

	noIP := newTestObserver(t, Config{Mode: ModeKubeProxy}, fake.NewClientset(&corev1.Node{}))
	withdrawnAPI(noIP)
	noIP.StopRequested(noIP.clk.Now())
	noIP.confirmRound(ctx)
	expect(t, noIP.Routing(noIP.clk.Now()), drain.RoutingUnverified, "no InternalIP")
}

func TestPodGracePeriod(t *testing.T) {
	o := newTestObserver(t, Config{Mode: ModeEndpointSlices}, nil)
	if _, ok := o.PodGracePeriod(); ok {
		t.Fatal("grace period known before the pod was seen")
	}
	g := int64(45)
	pod := &corev1.Pod{}
	pod.Name, pod.DeletionGracePeriodSeconds = "web-0", &g
	o.applyPod(pod, false, o.clk.Now())
	if d, ok := o.PodGracePeriod(); !ok || d.Seconds() != 45 {
		t.Fatalf("PodGracePeriod = %v, %v", d, ok)
	}
}

// since reads a path's R.
func (to *testObserver) since(k judge.PathKey) (t0 time.Time) {
	to.mu.Lock()
	defer to.mu.Unlock()
	if p := to.watch.paths[k]; p != nil {
		return p.Since
	}
	return t0
}
