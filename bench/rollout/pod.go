package main

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/hapsuper/hapsuper/conf"
	"github.com/hapsuper/hapsuper/test/harness"
	"github.com/hapsuper/hapsuper/test/harness/kube"
)

// haproxyCfg is every pod's HAProxy: HTTP/1.1 on 8080, h2c (prior
// knowledge) on 8081, both to a Go server in the pod on 127.0.0.1:9000 that
// answers the pod's name, or after d with /slow?d=<duration>. It carries
// the options hapsuper asks for, and the same for every strategy.
const haproxyCfg = `global
    maxconn 4000
defaults
    mode http
    timeout connect 2s
    timeout client 10s
    timeout server 10s
    timeout http-request 5s
    timeout http-keep-alive 10s
    timeout client-fin 1s
    option idle-close-on-response
frontend web
    bind :8080
    default_backend app
frontend h2
    bind :8081 proto h2
    default_backend app
backend app
    server app 127.0.0.1:9000
`

// backendPort is where the pod's Go application server listens.
const backendPort = 9000

// benchPod is one replica: a pod of the harness running the strategy's
// container (plain HAProxy, or HAProxy under hapsuper) and the Go backend,
// with the times of its stop as the bench played and observed them.
type benchPod struct {
	*kube.Container
	podResult // its stop, filled by stop; runCell adds what it saw from outside

	readyAt    time.Time // SetPodReady returned
	readyTicks int64     // the process's CPU ticks then
}

// startPod adds pod name on node with strategy s, starts its backend and
// container, and returns once the container serves (HAProxy ready; for
// hapsuper with routing, its watch synced too). The pod is not Ready yet.
func (r *runner) startPod(ctx context.Context, node int, name string, s strategy, labels map[string]string) (*benchPod, error) {
	e := r.env
	pod := e.H.AddPod(r.t, node, name, labels)
	pod.ServeHTTP(r.t, backendPort, http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) { serve(w, req, name) }))
	dir := e.PodDir(r.t, name)
	cfg := filepath.Join(dir, "haproxy.cfg")
	if err := os.WriteFile(cfg, []byte(haproxyCfg), 0o644); err != nil {
		return nil, fmt.Errorf("write HAProxy config of pod %s: %w", name, err)
	}
	p := &benchPod{podResult: podResult{name: name, node: pod.Node.Name, strat: s}}
	if !s.underHapsuper() {
		p.Container = kube.StartContainer(r.t, pod, "/usr/sbin/haproxy", "-W", "-db", "-f", cfg)
		return p, p.waitListening()
	}
	mode := s.routingMode()
	flags := s.args
	if r.opts.metrics && mode == conf.RoutingKubeProxy {
		flags = append(slices.Clone(flags), "--kube-proxy-metrics-port", strconv.Itoa(kubeProxyMetricsPort))
	}
	p.Container = e.StartHapsuper(r.t, pod, dir, kube.Hapsuper{Routing: mode, Grace: r.opts.grace, QuietPeriod: quietPeriod, Flags: flags, Config: cfg})
	return p, nil
}

// serve is the pod's application: its name, after d for /slow?d=<d>.
func serve(w http.ResponseWriter, req *http.Request, name string) {
	if req.URL.Path == "/slow" {
		d, _ := time.ParseDuration(req.URL.Query().Get("d"))
		select {
		case <-time.After(min(d, 30*time.Second)):
		case <-req.Context().Done():
			return
		}
	}
	_, _ = w.Write([]byte(name))
}

// waitListening waits (bounded) until plain HAProxy accepts on 8080.
func (p *benchPod) waitListening() error {
	if err := harness.WaitListening(p.DialContext, net.JoinHostPort(p.IP.String(), "8080"), 10*time.Second); err != nil {
		return fmt.Errorf("pod %s: HAProxy: %w; log:\n%s", p.Name, err, p.Tail(20))
	}
	return nil
}

// stop plays the kubelet from the delete on: the strategy's preStop and
// stop signal, SIGKILL at the grace period, and it returns once the process
// has exited. It runs in its own goroutine per pod.
func (p *benchPod) stop(grace time.Duration) {
	if p.strat.kind == stratHapsuper || p.strat.kind == stratQuiet {
		p.usage = measureUsage(p.Pid(), p.readyAt, p.readyTicks)
	}
	deadline := time.NewTimer(time.Until(p.deleted.Add(grace)))
	defer deadline.Stop()
	switch p.strat.kind {
	case stratImmediate, stratSleep:
		select {
		case <-time.After(p.strat.sleep): // preStop sleep (0 for immediate)
		case <-p.Done():
		}
		p.signal = time.Now()
		p.soft = p.signal
		p.ended = p.signal
		_ = p.Signal(syscall.SIGUSR1)
	default:
		p.signal = time.Now()
		_ = p.Signal(syscall.SIGTERM)
	}
	select {
	case <-p.Done():
	case <-deadline.C:
		p.killed = true
		p.Kill()
	}
	p.code, p.master = p.Exit()
	if !p.strat.underHapsuper() {
		return
	}
	// The last lines may still be in the pipe when the process is gone.
	p.WaitRead(2 * time.Second)
	d := p.ReadDrain(p.signal)
	p.ended, p.reason, p.detail, p.hapsuperW = cmp.Or(d.Ended, p.ended), d.Reason, d.Detail, d.Withdrawn
	p.soft, p.master = cmp.Or(d.Soft, p.soft), cmp.Or(d.HAProxyExit, p.master)
}

// usage is a process's memory and CPU while serving.
type usage struct {
	rssKB      int64
	cpuPercent float64 // of one core, averaged since the pod turned Ready
}

// measureUsage reads pid's VmRSS and its CPU share since since, when it
// had used baseTicks.
func measureUsage(pid int, since time.Time, baseTicks int64) usage {
	u := usage{rssKB: harness.StatusKB(pid, "VmRSS")}
	if el := time.Since(since).Seconds(); el > 0 && !since.IsZero() {
		u.cpuPercent = 100 * float64(harness.CPUTicks(pid)-baseTicks) / 100 / el // USER_HZ = 100
	}
	return u
}
