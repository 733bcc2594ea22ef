package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hapsuper/hapsuper/test/harness"
)

// A load balancer that health-checks the pod itself (IP targets,
// hostNetwork): a real HAProxy in front of hapsuper's HAProxy and of a
// second origin, checking hapsuper's --lb-check-bind every 500 ms, down
// after 3 failures. Clients through the balancer open a new connection every
// 20 ms and pause from the stop for longer than the quiet period. The check
// answers 503 from the stop on; the drain holds until the balancer's
// checking address has had its 3 failed checks — when the balancer marks
// the pod down — and the paused clients, resuming before that, are still
// served. The drain's detail names the checking address and its count.
func TestLBCheck_BalancerMarksThePodDown(t *testing.T) {
	eachHAProxy(t, func(t *testing.T, h haproxyVersion) {
		cfg := newConfig(t)
		check := fmt.Sprintf("127.0.0.1:%d", freePort(t))
		s := serve(t, h, cfg, "--lb-check-bind", check, "--lb-check-threshold", "3")
		other := startBackend(t)
		lb := startBalancer(t, h, cfg.webAddr(), check, other.addr)

		var stopped atomic.Int64
		pause := 1200 * time.Millisecond // resumes while the balancer still sends to the pod
		c := startLoop(t, "through the balancer", 20*time.Millisecond, 30*time.Second, func(_ context.Context, rec *recorder) {
			if at := stopped.Load(); at != 0 && time.Since(time.Unix(0, at)) < pause {
				return
			}
			oneShot(rec, lb.addr, "/", 0, requestTimeout)
		})
		time.Sleep(time.Second)
		stopped.Store(time.Now().UnixNano())
		term := s.signal(syscall.SIGTERM)
		ended := s.waitLog("drain ended", 15*time.Second)
		_, exitAt := s.waitExit(10 * time.Second)
		c.stop()
		t.Log(c.rec.summary())

		down := lb.DownAt("pod")
		if down.IsZero() {
			t.Fatalf("the balancer never marked the pod down; drain ended %s: %s", ended.Str("reason"), ended.Str("detail"))
		}
		t.Logf("balancer marked the pod down %v after the stop; drain ended %v after it (%s: %s); exit +%v",
			down.Sub(term).Round(time.Millisecond), ended.At.Sub(down).Round(time.Millisecond), ended.Str("reason"), ended.Str("detail"), exitAt.Sub(term).Round(time.Millisecond))
		checkNoFailures(t, c.rec)
		if ended.At.Before(down) {
			t.Errorf("drain ended %v before the balancer marked the pod down", down.Sub(ended.At))
		}
		for _, want := range []string{"load balancers checking the pod at " + check, "(threshold 3): 127.0.0.1 "} {
			if !strings.Contains(ended.Str("detail"), want) {
				t.Errorf("drain detail %q does not say %q", ended.Str("detail"), want)
			}
		}
		if _, ok := s.Find("load balancers checking the pod marked it down", nil); !ok {
			t.Error("no log line saying the balancers marked the pod down")
		}
	})
}

// balancer is a load balancer's stand-in: HAProxy h in TCP mode on
// loopback, sending to pod (checked on its check address) and other (never
// checked, always up).
type balancer struct {
	*harness.Process
	*harness.ServerWatch
	addr, stats string
}

func startBalancer(t *testing.T, h haproxyVersion, pod, check, other string) *balancer {
	t.Helper()
	dir := t.TempDir()
	lb := &balancer{addr: fmt.Sprintf("127.0.0.1:%d", freePort(t)), stats: filepath.Join(dir, "stats.sock")}
	_, checkPort, _ := strings.Cut(check, ":")
	cfg := fmt.Sprintf(`global
    stats socket %s mode 600 level admin
defaults
    mode tcp
    retries 0
    timeout connect 1s
    timeout client 10s
    timeout server 10s
frontend lb
    bind %s
    default_backend pods
backend pods
    option httpchk GET /
    http-check expect status 200
    server pod %s check port %s inter 500ms fall 3 rise 1
    server other %s
`, lb.stats, lb.addr, pod, checkPort, other)
	path := filepath.Join(dir, "lb.cfg")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(h.command(t, dir), "-db", "-f", path)
	var err error
	if lb.Process, err = harness.Start(cmd); err != nil {
		t.Fatal(err)
	}
	if err := harness.WaitListening(nil, lb.addr, 5*time.Second); err != nil {
		lb.Kill()
		t.Fatalf("balancer: %v\n%s", err, lb.Tail(20))
	}
	var stop func()
	lb.ServerWatch, stop = harness.WatchServers(lb.stats, "pods")
	t.Cleanup(func() {
		stop()
		lb.Kill()
		if t.Failed() {
			t.Logf("balancer log:\n%s", lb.Tail(30))
		}
	})
	// Up before the test goes on: the pod's check passed.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		st, err := harness.ServerStates(lb.stats, "pods")
		if err == nil && strings.HasPrefix(st["pod"], "UP") && !strings.Contains(st["pod"], "/") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("balancer: the pod not UP within 5s: %v %v\n%s", st, err, lb.Tail(20))
		}
	}
	return lb
}
