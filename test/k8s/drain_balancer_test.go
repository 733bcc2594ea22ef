package k8s_test

// The ingress position: a LoadBalancer Service with externalTrafficPolicy
// Local, one hapsuper pod per node, behind a load balancer that
// health-checks every node's healthCheckNodePort. The balancer is a real
// HAProxy in TCP mode on the host, outside the nodes (a network load
// balancer's stand-in): it forwards to the nodes' NodePort, checks each
// node's health check port with GET / (no retries), and its own stats say
// when it marked a node down. The clients connect to it from the host.

import (
	"bufio"
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/hapsuper/hapsuper/test/harness"
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

// nlb is the load balancer.
type nlb struct {
	*harness.Process
	addr  string // where clients connect
	stats string // its stats socket

	mu   sync.Mutex
	down map[string]time.Time // server → when the poller first saw it DOWN (since the last UP)
	up   map[string]bool
}

// lbService creates Service name: type LoadBalancer, externalTrafficPolicy
// Local, port 80 → 8080, selecting app=name. It returns the node port and
// the health check node port the apiserver allocated.
func (e *drainEnv) lbService(t *testing.T, name string) (nodePort, hcPort int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	svc, err := e.H.Client.CoreV1().Services(k8stest.PodNamespace).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.ServiceSpec{
			Type:                  corev1.ServiceTypeLoadBalancer,
			ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyLocal,
			Selector:              map[string]string{"app": name},
			Ports:                 []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create LoadBalancer Service %s: %v", name, err)
	}
	if svc.Spec.HealthCheckNodePort == 0 || len(svc.Spec.Ports) == 0 || svc.Spec.Ports[0].NodePort == 0 {
		t.Fatalf("Service %s: no node port or health check node port allocated: %+v", name, svc.Spec)
	}
	return svc.Spec.Ports[0].NodePort, svc.Spec.HealthCheckNodePort
}

// startNLB starts the balancer in front of every node of e and polls its
// stats every 50 ms until the test ends.
func (e *drainEnv) startNLB(t *testing.T, nodePort, hcPort int32, inter time.Duration, fall int) *nlb {
	t.Helper()
	dir := e.PodDir(t, "load-balancer") // no comma, unlike a subtest's TempDir: HAProxy's address syntax
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	lb := &nlb{addr: addr, stats: filepath.Join(dir, "stats.sock"), down: map[string]time.Time{}, up: map[string]bool{}}
	var servers strings.Builder
	for _, n := range e.H.Nodes() {
		fmt.Fprintf(&servers, "    server %s %s:%d\n", n.Name, n.IP, nodePort)
	}
	cfg := fmt.Sprintf(`global
    stats socket %s mode 600 level admin
defaults
    mode tcp
    retries 0
    timeout connect 1s
    timeout client 30s
    timeout server 30s
frontend lb
    bind %s
    default_backend nodes
backend nodes
    option httpchk GET /
    http-check expect status 200
    default-server check port %d inter %dms fall %d rise 1
%s`, lb.stats, addr, hcPort, inter.Milliseconds(), fall, servers.String())
	path := filepath.Join(dir, "lb.cfg")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/usr/sbin/haproxy", "-db", "-f", path)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if lb.Process, err = harness.Start(cmd); err != nil {
		t.Fatalf("start the load balancer: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var polling sync.WaitGroup
	t.Cleanup(func() {
		cancel()
		polling.Wait()
		lb.Kill()
		if t.Failed() {
			t.Logf("load balancer log:\n%s", lb.Tail(40))
		}
	})
	if err := harness.WaitListening(nil, addr, 5*time.Second); err != nil {
		t.Fatalf("load balancer: %v; log:\n%s", err, lb.Tail(20))
	}
	polling.Go(func() { lb.poll(ctx) })
	return lb
}

// poll reads the balancer's server states every 50 ms until ctx ends.
func (lb *nlb) poll(ctx context.Context) {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		states, err := lb.states()
		now := time.Now()
		if err == nil {
			lb.mu.Lock()
			for srv, st := range states {
				switch {
				case strings.HasPrefix(st, "UP") && !strings.Contains(st, "going down"):
					lb.up[srv] = true
					delete(lb.down, srv)
				case strings.HasPrefix(st, "DOWN"):
					if _, seen := lb.down[srv]; !seen {
						lb.down[srv] = now
					}
					lb.up[srv] = false
				}
			}
			lb.mu.Unlock()
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// states is the status column of `show stat` per server of backend nodes.
func (lb *nlb) states() (map[string]string, error) {
	conn, err := net.DialTimeout("unix", lb.stats, time.Second)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(time.Second))
	if _, err := io.WriteString(conn, "show stat\n"); err != nil {
		return nil, err
	}
	r := csv.NewReader(bufio.NewReader(conn))
	r.FieldsPerRecord = -1
	rows, err := r.ReadAll()
	if err != nil || len(rows) == 0 {
		return nil, fmt.Errorf("show stat: %v (%d rows)", err, len(rows))
	}
	head := rows[0]
	head[0] = strings.TrimPrefix(head[0], "# ")
	col := func(name string) int { return slices.Index(head, name) }
	px, sv, status := col("pxname"), col("svname"), col("status")
	if px < 0 || sv < 0 || status < 0 {
		return nil, fmt.Errorf("show stat: no pxname/svname/status in %v", head)
	}
	out := map[string]string{}
	for _, row := range rows[1:] {
		if len(row) > status && row[px] == "nodes" && row[sv] != "BACKEND" {
			out[row[sv]] = row[status]
		}
	}
	return out, nil
}

// downAt is when the balancer marked server down, zero while it has not.
func (lb *nlb) downAt(server string) time.Time {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	return lb.down[server]
}

// waitUp waits (bounded) until the balancer has every server up.
func (lb *nlb) waitUp(t *testing.T, servers ...string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		lb.mu.Lock()
		all := !slices.ContainsFunc(servers, func(s string) bool { return !lb.up[s] })
		lb.mu.Unlock()
		if all {
			return
		}
	}
	st, err := lb.states()
	t.Fatalf("load balancer: servers %v not all UP within 10s: %v %v", servers, st, err)
}

// url is the balancer's address as clients use it.
func (lb *nlb) url() string { return "http://" + lb.addr + "/" }

// lbEnv is two nodes, a LoadBalancer Service web with externalTrafficPolicy
// Local, hapsuper pods web-a on node1 and web-b on node2 (kube-proxy mode,
// quiet lbQuiet, the flags given), and the balancer in front, with both
// nodes up.
func lbEnv(t *testing.T, fall int, flags ...string) (*drainEnv, *nlb, *hapPod, *hapPod) {
	t.Helper()
	return lbEnvWith(t, fall, podOptions{quiet: lbQuiet, flags: flags})
}

// lbEnvWith is lbEnv with the pods' options.
func lbEnvWith(t *testing.T, fall int, o podOptions) (*drainEnv, *nlb, *hapPod, *hapPod) {
	t.Helper()
	e := newDrainEnv(t, k8stest.Options{Nodes: 2})
	nodePort, hcPort := e.lbService(t, "web")
	a := e.startPodWith(t, 1, "web-a", "web", o)
	b := e.startPodWith(t, 2, "web-b", "web", o)
	a.ready(t)
	b.ready(t)
	lb := e.startNLB(t, nodePort, hcPort, lbInter, fall)
	lb.waitUp(t, "node1", "node2")
	waitSeenVia(t, lb.url(), 10*time.Second, "web-a", "web-b")
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

// checkMarkedDown asserts a drain that ended lb-marked-down after the
// balancer marked the pod's node down and within the withdrawn quiet
// period (+0.5 s) of it, with a detail naming the Service, the check, the
// window and its source, and the last new connection.
func checkMarkedDown(t *testing.T, lb *nlb, r drainRecord, node string) {
	t.Helper()
	checkReason(t, r, "lb-marked-down")
	down := lb.downAt(node)
	if down.IsZero() {
		t.Errorf("%s: the load balancer never marked %s down", r.pod, node)
		return
	}
	gap := r.Ended.Sub(down)
	t.Logf("%s: balancer marked %s down +%v after the delete; drain ended %v after that", r.pod, node,
		down.Sub(r.deleted).Round(time.Millisecond), gap.Round(time.Millisecond))
	if gap < 0 || gap > lbQuiet+500*time.Millisecond {
		t.Errorf("%s: drain ended %v after the balancer marked %s down: want within [0, withdrawn quiet %v + 0.5s]",
			r.pod, gap.Round(time.Millisecond), node, lbQuiet)
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
		tr.Every("host", newConnClient(), lb.url(), 20*time.Millisecond, true)
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
			tr.Every("host", harness.KeepAliveClient(nil, requestTimeout), lb.url(), 50*time.Millisecond, false)
			tr.Every("host", harness.H2CClient(nil, requestTimeout), lb.url(), 50*time.Millisecond, false)
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
		tr.Every("host", newConnClient(), lb.url(), 20*time.Millisecond, true)
		t.Cleanup(tr.Stop)
		time.Sleep(500 * time.Millisecond)
		a.terminate(t)
		ra := a.ended(t, true)
		checkMarkedDown(t, lb, ra, "node1")
		a2 := e.startPodWith(t, 1, "web-a2", "web", podOptions{quiet: lbQuiet, flags: []string{"--lb-health-check-window", lbWindow.String()}})
		a2.ready(t)
		lb.waitUp(t, "node1")
		waitSeenVia(t, lb.url(), 10*time.Second, "web-a2")
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
		tr.Every("host", newConnClient(), lb.url(), 20*time.Millisecond, true)
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
			tr.Every("host", newConnClient(), lb.url(), 20*time.Millisecond, true)
			t.Cleanup(tr.Stop)
			time.Sleep(500 * time.Millisecond)
			deleted.Store(time.Now().UnixNano())
			a.terminate(t)
			r := a.ended(t, true)
			// The clients keep going until the balancer has marked node1
			// down: what it sent there after the drain ended is the point.
			for deadline := time.Now().Add(15 * time.Second); lb.downAt("node1").IsZero() && time.Now().Before(deadline); {
				time.Sleep(50 * time.Millisecond)
			}
			time.Sleep(500 * time.Millisecond)
			tr.Stop()
			failed := tr.failedBefore(time.Time{})
			t.Logf("%s: %d of %d requests failed; drain ended %s +%v after the delete; balancer marked node1 down +%v",
				tc.name, len(failed), len(tr.Outcomes()), r.Reason, r.Ended.Sub(r.deleted).Round(time.Millisecond),
				lb.downAt("node1").Sub(r.deleted).Round(time.Millisecond))
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
