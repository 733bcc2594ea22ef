package k8s_test

// The ingress position: a LoadBalancer Service with externalTrafficPolicy
// Local, one hapsuper pod per node, behind a load balancer that
// health-checks every node's healthCheckNodePort: kube.Balancer, a real
// HAProxy in TCP mode on the host, outside the nodes, whose own stats say
// when it marked a node down. The clients connect to it from the host.

import (
	"context"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/hapsuper/hapsuper/conf"
	"github.com/hapsuper/hapsuper/test/harness"
	"github.com/hapsuper/hapsuper/test/harness/kube"
	"github.com/hapsuper/hapsuper/test/k8s/k8stest"
)

// The balancer's health check in these scenarios: every second, two
// failures mark a node down; the window hapsuper is told is interval ×
// threshold + one interval.
const (
	lbInter  = time.Second
	lbFall   = 2
	lbWindow = 3 * time.Second
	// lbQuiet is the pods' quiet period (and so the withdrawn one): the
	// product's default.
	lbQuiet = 2 * time.Second
)

// lbEnv is two nodes, a LoadBalancer Service web with externalTrafficPolicy
// Local, hapsuper pods web-a on node1 and web-b on node2 (kube-proxy mode,
// quiet lbQuiet, the flags given), and the balancer in front, with both
// nodes up.
func lbEnv(t *testing.T, fall int, flags ...string) (*drainEnv, *kube.Balancer, *hapPod, *hapPod) {
	t.Helper()
	return lbEnvWith(t, fall, podOptions{quiet: lbQuiet, flags: flags})
}

// lbEnvWith is lbEnv with the pods' options.
func lbEnvWith(t *testing.T, fall int, o podOptions) (*drainEnv, *kube.Balancer, *hapPod, *hapPod) {
	t.Helper()
	e := newDrainEnv(t, k8stest.Options{Nodes: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	svc, err := e.LoadBalancerService(ctx, "web", "web", corev1.ServicePort{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)})
	if err != nil {
		t.Fatal(err)
	}
	a := e.startPodWith(t, 1, "web-a", "web", o)
	b := e.startPodWith(t, 2, "web-b", "web", o)
	a.ready(t)
	b.ready(t)
	lb := kube.StartBalancer(t, e.PodDir(t, "balancer"), e.H.Nodes(), svc, lbInter, fall)
	if err := lb.WaitUp(10*time.Second, "node1", "node2"); err != nil {
		t.Fatal(err)
	}
	waitSeenVia(t, lb.URL(0), 10*time.Second, "web-a", "web-b")
	return e, lb, a, b
}

// waitSeenVia waits (bounded) until requests to url from the host were
// answered by every pod of want.
func waitSeenVia(t *testing.T, url string, bound time.Duration, want ...string) {
	t.Helper()
	client := newConnClient()
	seen := map[string]int{}
	for deadline := time.Now().Add(bound); time.Now().Before(deadline); {
		if o := harness.Request(client, "host", url); o.Kind == harness.KindOK {
			seen[o.Pod]++
			if !slices.ContainsFunc(want, func(w string) bool { return seen[w] == 0 }) {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("requests to %s within %v reached %v, want each of %v", url, bound, seen, want)
}

// newConnClient is a client from the host opening a new connection per
// request.
func newConnClient() *http.Client {
	return &http.Client{Timeout: requestTimeout, Transport: &http.Transport{DisableKeepAlives: true, Proxy: nil}}
}

// pauseAfter pauses every client for d from the instant *at (unix ns,
// wall clock; 0: not yet) is set.
func pauseAfter(at *atomic.Int64, d time.Duration) pauseFunc {
	return func(_ string, now time.Time) bool {
		from := at.Load()
		if from == 0 {
			return false
		}
		since := now.Sub(time.Unix(0, from))
		return since >= 0 && since < d
	}
}

// lbLatestGap is the longest a drain may end after the balancer marked its
// node down. Two things end it: the quiet after the last new connection (the
// balancer's last, at the mark-down), and the window counted from the first
// failing answer hapsuper saw, up to a poll after the node's health check
// turned; the balancer marks the node down at the earliest (fall − 1) ×
// inter after that turn, so the window can end up to window − (fall − 1) ×
// inter + a poll after the mark-down. Plus half a second for hapsuper's tick.
var lbLatestGap = max(lbQuiet, lbWindow-(lbFall-1)*lbInter+conf.DefaultCounterPollInterval) + 500*time.Millisecond

// failingFor finds, in a drain's detail, how long hapsuper had seen the
// node's health check failing.
var failingFor = regexp.MustCompile(`failing for ([0-9.]+s) \(`)

// checkMarkedDown asserts a drain that ended lb-marked-down after the
// balancer marked the pod's node down and within lbLatestGap of it, with a
// detail naming the Service, the check, the window and its source, and the
// last new connection.
func checkMarkedDown(t *testing.T, lb *kube.Balancer, r drainRecord, node string) {
	t.Helper()
	checkReason(t, r, "lb-marked-down")
	down := lb.DownAt(node)
	if down.IsZero() {
		t.Errorf("%s: the load balancer never marked %s down", r.pod, node)
		return
	}
	gap := r.Ended.Sub(down)
	t.Logf("%s: balancer marked %s down +%v after the delete; drain ended %v after that", r.pod, node,
		down.Sub(r.deleted).Round(time.Millisecond), gap.Round(time.Millisecond))
	if gap < 0 || gap > lbLatestGap {
		t.Errorf("%s: drain ended %v after the balancer marked %s down: want within [0, %v] (the later of the withdrawn quiet %v and the window's end, + 0.5s)",
			r.pod, gap.Round(time.Millisecond), node, lbLatestGap, lbQuiet)
	}
	// Which of the two ended it: the detail says how long hapsuper had seen
	// the check failing (to 0.1 s). Never less than the window; more than a
	// poll past it only if the quiet held the drain, which then ends within
	// the quiet (+1 s) of the mark-down, as the last new connection came
	// at it.
	const shown = 50 * time.Millisecond // the detail's rounding
	if m := failingFor.FindStringSubmatch(r.Detail); m == nil {
		t.Errorf("%s: drain detail %q does not say how long the health check was failing", r.pod, r.Detail)
	} else if failing, err := time.ParseDuration(m[1]); err != nil {
		t.Errorf("%s: drain detail %q: %v", r.pod, r.Detail, err)
	} else if failing < lbWindow-shown {
		t.Errorf("%s: drain ended with the health check failing for %v, before the window %v passed", r.pod, failing, lbWindow)
	} else if failing > lbWindow+conf.DefaultCounterPollInterval+shown && gap > lbQuiet+time.Second {
		t.Errorf("%s: drain ended %v after the mark-down, the health check failing for %v: later than the window %v (+ a poll) and the withdrawn quiet %v (+1 s, a loaded machine's late poll) both",
			r.pod, gap.Round(time.Millisecond), failing, lbWindow, lbQuiet)
	}
	for _, want := range []string{"default/web", "health check http://", "window 3s (--lb-health-check-window)", "last new connection"} {
		if !strings.Contains(r.Detail, want) {
			t.Errorf("%s: drain detail %q does not say %q", r.pod, r.Detail, want)
		}
	}
}

// Clients open a new connection every 20 ms through the balancer and all
// pause 2.5 s right after web-a's delete, longer than the quiet period.
// The balancer sends to node1, whose only ready pod web-a was, until it
// marks node1 down; kube-proxy forwards those to web-a meanwhile. hapsuper
// ends the drain lb-marked-down after that: no request fails.
func TestDrain_BehindLoadBalancer(t *testing.T) {
	t.Run("new connections pause after the delete", func(t *testing.T) {
		_, lb, a, _ := lbEnv(t, lbFall, "--lb-health-check-window", lbWindow.String())
		var deleted atomic.Int64
		tr := &traffic{harness.NewTraffic(pauseAfter(&deleted, 2500*time.Millisecond))}
		tr.Every("host", newConnClient(), lb.URL(0), 20*time.Millisecond, true)
		t.Cleanup(tr.Stop)
		time.Sleep(500 * time.Millisecond)
		deleted.Store(time.Now().UnixNano())
		r := a.drainUnder(t, tr, true)
		checkNoFailures(t, tr, time.Time{})
		checkMarkedDown(t, lb, r, "node1")
	})

	// Kept-alive HTTP/1.1 and h2c clients through the balancer never
	// pause: their connections stay on web-a until its soft stop ends
	// them cleanly, then they reconnect through the balancer to node2.
	t.Run("kept-alive and h2", func(t *testing.T) {
		_, lb, a, _ := lbEnv(t, lbFall, "--lb-health-check-window", lbWindow.String())
		tr := &traffic{harness.NewTraffic(nil)}
		for range 3 {
			tr.Every("host", harness.KeepAliveClient(nil, requestTimeout), lb.URL(0), 50*time.Millisecond, false)
			tr.Every("host", harness.H2CClient(nil, requestTimeout), lb.URL(0), 50*time.Millisecond, false)
		}
		t.Cleanup(tr.Stop)
		time.Sleep(time.Second)
		if len(tr.answeredBy("web-a", time.Time{})) == 0 {
			t.Fatalf("no kept-alive connection landed on web-a: %s", tr.summary())
		}
		r := a.drainUnder(t, tr, true)
		checkNoFailures(t, tr, time.Time{})
		checkReason(t, r, "lb-marked-down")
		if later := tr.Where(func(o harness.Outcome) bool {
			return o.Kind == harness.KindOK && o.Pod == "web-b" && o.Sent.After(r.Soft)
		}); len(later) == 0 {
			t.Errorf("no request after web-a's soft stop answered by web-b: %s", tr.summary())
		}
	})

	// A rollout: web-a drains, its replacement web-a2 on node1 becomes
	// ready and the balancer marks node1 up again, then web-b drains.
	t.Run("rollout", func(t *testing.T) {
		e, lb, a, b := lbEnv(t, lbFall, "--lb-health-check-window", lbWindow.String())
		tr := &traffic{harness.NewTraffic(nil)}
		tr.Every("host", newConnClient(), lb.URL(0), 20*time.Millisecond, true)
		t.Cleanup(tr.Stop)
		time.Sleep(500 * time.Millisecond)
		a.terminate(t)
		ra := a.ended(t, true)
		checkMarkedDown(t, lb, ra, "node1")
		a2 := e.startPodWith(t, 1, "web-a2", "web", podOptions{quiet: lbQuiet, flags: []string{"--lb-health-check-window", lbWindow.String()}})
		a2.ready(t)
		if err := lb.WaitUp(10*time.Second, "node1"); err != nil {
			t.Fatal(err)
		}
		waitSeenVia(t, lb.URL(0), 10*time.Second, "web-a2")
		rb := b.drainUnder(t, tr, true)
		checkNoFailures(t, tr, time.Time{})
		checkMarkedDown(t, lb, rb, "node2")
		if n := len(tr.answeredBy("web-a2", rb.Ended)); n == 0 {
			t.Errorf("no request after web-b's drain answered by web-a2: %s", tr.summary())
		}
	})

	// The window unknown: the drain holds to the bound as before, its
	// detail naming the setting that would end it; nothing fails.
	t.Run("window unknown", func(t *testing.T) {
		_, lb, a, _ := lbEnv(t, lbFall)
		tr := &traffic{harness.NewTraffic(nil)}
		tr.Every("host", newConnClient(), lb.URL(0), 20*time.Millisecond, true)
		t.Cleanup(tr.Stop)
		time.Sleep(500 * time.Millisecond)
		r := a.drainUnder(t, tr, true)
		checkNoFailures(t, tr, time.Time{})
		checkReason(t, r, "bound")
		if !strings.Contains(r.Detail, "set --lb-health-check-window") {
			t.Errorf("bound detail %q does not name --lb-health-check-window", r.Detail)
		}
		if d := r.Ended.Sub(r.term); d < drainBound-200*time.Millisecond || d > drainBound+time.Second {
			t.Errorf("drain ended %v after SIGTERM: want the bound, %v", d, drainBound)
		}
	})
}

// The control: the same ingress with routing off. The balancer here marks a
// node down after three failed checks, later than the quiet period, and the
// clients pause 1.5 s right after the delete: the pause ends the drain on
// quiet, the listeners close, and the clients' next connections, which the
// balancer still sends to node1, are refused there. (With the two-failure
// balancer above, a node is down within ~2.1 s, before a 2.5 s pause
// ends, and the guess happens to hold.) hapsuper with routing observed,
// behind the same balancer, fails nothing.
func TestDrain_BehindLoadBalancer_RoutingOffFails(t *testing.T) {
	const fall = 3
	window := (lbInter*fall + lbInter).String()
	for _, tc := range []struct {
		name  string
		pods  podOptions
		fails bool
	}{
		{"routing off", podOptions{routing: "off", quiet: drainQuiet}, true},
		{"routing kube-proxy", podOptions{quiet: lbQuiet, flags: []string{"--lb-health-check-window", window}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, lb, a, _ := lbEnvWith(t, fall, tc.pods)
			var deleted atomic.Int64
			tr := &traffic{harness.NewTraffic(pauseAfter(&deleted, 1500*time.Millisecond))}
			tr.Every("host", newConnClient(), lb.URL(0), 20*time.Millisecond, true)
			t.Cleanup(tr.Stop)
			time.Sleep(500 * time.Millisecond)
			deleted.Store(time.Now().UnixNano())
			a.terminate(t)
			r := a.ended(t, true)
			// The clients keep going until the balancer has marked node1
			// down: what it sent there after the drain ended is the point.
			for deadline := time.Now().Add(15 * time.Second); lb.DownAt("node1").IsZero() && time.Now().Before(deadline); {
				time.Sleep(50 * time.Millisecond)
			}
			time.Sleep(500 * time.Millisecond)
			tr.Stop()
			failed := tr.failedBefore(time.Time{})
			t.Logf("%s: %d of %d requests failed; drain ended %s +%v after the delete; balancer marked node1 down +%v",
				tc.name, len(failed), len(tr.Outcomes()), r.Reason, r.Ended.Sub(r.deleted).Round(time.Millisecond),
				lb.DownAt("node1").Sub(r.deleted).Round(time.Millisecond))
			switch {
			case tc.fails && len(failed) == 0:
				t.Errorf("routing off: no request failed; the control no longer shows the guess failing: %s", tr.summary())
			case !tc.fails:
				checkNoFailures(t, tr, time.Time{})
				checkReason(t, r, "lb-marked-down")
			}
		})
	}
}
