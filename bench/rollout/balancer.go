package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/hapsuper/hapsuper/test/harness"
	"github.com/hapsuper/hapsuper/test/harness/kube"
)

// The balancer part: the ingress position. A LoadBalancer Service with
// externalTrafficPolicy Local over the same pods, behind kube.Balancer (a
// real HAProxy in TCP mode on the host, health-checking every node's
// healthCheckNodePort every second, down after two failures, no retries),
// the clients on the host connecting to it. Each rollout replaces the pods
// as a DaemonSet does (maxUnavailable 1): the node's old pod is deleted and
// has exited before its replacement starts on the same node, so the old
// pod is its node's only ready one and only the balancer's mark-down stops
// the node's traffic. hapsuper runs with --lb-health-check-window set to
// the balancer's window.

// The balancer's health check and the window hapsuper is told.
const (
	lbInter  = time.Second
	lbFall   = 2
	lbWindow = lbInter*lbFall + lbInter
)

// lbPart is what the balancer part measured.
type lbPart struct {
	cells  []cellResult
	search []searchResult
	sleepN time.Duration // 0: no candidate had 0 failures
}

// toldTheWindow is s, when hapsuper with routing, told the balancer's
// window.
func toldTheWindow(s strategy) strategy {
	if s.kind == stratHapsuper {
		s.args = append(slices.Clone(s.args), "--lb-health-check-window", lbWindow.String())
	}
	return s
}

// runBalancer runs the balancer part: the sleep candidates (each stopping
// at its first cell with failures), quiet, and hapsuper, over the client
// patterns, kube-proxy live.
func (r *runner) runBalancer(ctx context.Context) (*lbPart, error) {
	svc, err := r.env.LoadBalancerService(ctx, serviceName+"-lb", serviceName,
		corev1.ServicePort{Name: "http", Port: httpPort, TargetPort: intstr.FromInt32(8080)},
		corev1.ServicePort{Name: "h2", Port: h2Port, TargetPort: intstr.FromInt32(8081)})
	if err != nil {
		return nil, err
	}
	lb := kube.StartBalancer(r.t, r.env.PodDir(r.t, "balancer"), r.env.H.Nodes(), svc, lbInter, lbFall)
	part := &lbPart{}
	run := func(s strategy, failFast bool) (searchResult, error) {
		var cells []cell
		for _, pat := range r.opts.patterns {
			cells = append(cells, cell{strat: s, pat: pat, lb: true})
		}
		return r.runCells(cells, failFast, func(_ int, c cell) (cellResult, error) { return r.runLBCell(ctx, lb, c) },
			func(res cellResult) { part.cells = append(part.cells, res) })
	}
	for _, d := range r.opts.lbCandidates {
		if part.sleepN != 0 {
			break // a shorter candidate passed
		}
		s := sleepFor(d)
		r.printf("behind the balancer: strategy %s (sleep-N candidate: stops at its first cell with failures)\n", s.name)
		sr, err := run(s, true)
		if err != nil {
			return part, err
		}
		part.search = append(part.search, sr)
		if sr.passed() {
			part.sleepN = d
		}
	}
	for _, s := range r.opts.lbStrategies {
		r.printf("behind the balancer: strategy %s\n", s.name)
		if _, err := run(s, false); err != nil {
			return part, err
		}
	}
	return part, nil
}

// runLBCell runs one rollout of c behind lb, node after node.
func (r *runner) runLBCell(ctx context.Context, lb *kube.Balancer, c cell) (cellResult, error) {
	if err := r.readyPods(ctx, c.strat); err != nil {
		return cellResult{}, err
	}
	var names []string
	for _, n := range r.env.H.Nodes() {
		names = append(names, n.Name)
	}
	if err := lb.WaitUp(15*time.Second, names...); err != nil {
		return cellResult{}, err
	}
	res := cellResult{cell: c, start: time.Now()}
	tr := startTrafficVia(c.pat, lb.URL(0), lb.URL(1))
	time.Sleep(warmUp)
	var next []*benchPod
	var errs []error
	for i, old := range r.cur {
		if err := r.env.H.DeletePod(ctx, old.Pod, r.opts.grace); err != nil {
			tr.Stop()
			return cellResult{}, err
		}
		old.deleted = time.Now()
		tr.deleted(old.deleted)
		old.stop(r.opts.grace)
		// When the balancer marked the node down: read before the
		// replacement brings it up again.
		old.nodeRules = map[string]time.Time{old.node + " (balancer)": lb.DownAt(old.node)}
		fctx, fcancel := context.WithTimeout(ctx, 10*time.Second)
		errs = append(errs, r.env.H.FinishPod(fctx, old.Pod))
		fcancel()
		repl, err := r.newReplica(ctx, i+1, c.strat)
		if err == nil {
			err = r.markReady(ctx, repl)
		}
		if err == nil {
			err = lb.WaitUp(15*time.Second, old.node)
		}
		if err != nil {
			tr.Stop()
			return cellResult{}, err
		}
		next = append(next, repl)
	}
	r.endCell(&res, tr)
	r.cur = next
	if r.opts.verbose {
		bad := tr.Where(func(o harness.Outcome) bool { return o.Kind != harness.KindOK })
		if len(bad) > 0 {
			r.printf("  failed, times after the first delete %s:%s\n", res.pods[0].deleted.Format("15:04:05.000"), harness.Describe(bad, 10))
		}
		for _, p := range res.pods {
			r.printf("  %v\n", p)
		}
	}
	if err := errors.Join(errs...); err != nil {
		r.printf("  warning: %v: %v\n", c, err)
	}
	return res, nil
}

// startTrafficVia starts pat's clients on the host against the balancer's
// HTTP/1.1 and h2c addresses.
func startTrafficVia(pat pattern, url, h2url string) *traffic {
	tr := &traffic{pat: pat}
	tr.Traffic = harness.NewTraffic(func(_ string, now time.Time) bool { return tr.paused(now) })
	conn := func(timeout time.Duration) *http.Client {
		return &http.Client{Timeout: timeout, Transport: &http.Transport{DisableKeepAlives: true, Proxy: nil}}
	}
	// Twice the per-node rate of the ClusterIP cells: one client stands
	// for both nodes' clients there.
	switch pat {
	case patNewConns, patPause:
		tr.Every("lb", conn(2*time.Second), url, 20*time.Millisecond, true)
	case patSlow:
		tr.Every("lb", conn(6*time.Second), url+"slow?d=3s", 100*time.Millisecond, true)
	case patKeepAlive, patIdlePool:
		every := 80 * time.Millisecond
		if pat == patIdlePool {
			every = idlePoolEvery
		}
		for range 4 {
			tr.Every("lb", harness.KeepAliveClient(nil, 2*time.Second), url, every, false)
		}
	case patH2:
		for range 4 {
			tr.Every("lb", harness.H2CClient(nil, 2*time.Second), h2url, 80*time.Millisecond, true)
		}
	}
	return tr
}

// lbReport is the balancer part's section of the results.
func lbReport(p *lbPart) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n## Behind a load balancer (externalTrafficPolicy Local)\n\n"+
		"A LoadBalancer Service with externalTrafficPolicy Local over the same pods, behind a real HAProxy in TCP mode on the host (the network load balancer's stand-in): "+
		"it health-checks every node's healthCheckNodePort every %v and marks a node down after %d failures, no retries; the clients connect to it from the host. "+
		"Each rollout replaces the pods as a DaemonSet does: the node's old pod is deleted and has exited before its replacement starts on the same node, "+
		"so only the balancer's mark-down stops the node's traffic. hapsuper runs with `--lb-health-check-window %v`. "+
		"withdrawn = hapsuper's `routing state=withdrawn` for hapsuper, else when the balancer marked the node down (its stats, polled every 50 ms).\n\n",
		lbInter, lbFall, lbWindow)
	b.WriteString(cellTable(p.cells))
	if len(p.search) > 0 {
		b.WriteString("\n### sleep-N search behind the balancer\n\n| preStop sleep | cells run | failures | first cell with failures |\n|---|--:|--:|---|\n")
		for _, s := range p.search {
			fmt.Fprintf(&b, "| %v | %d | %d | %s |\n", s.sleep, s.cells, s.failures, cmpOr(s.first, "none"))
		}
	}
	b.WriteString("\n### Targets behind the balancer\n\n| target | measured | verdict |\n|---|---|---|\n")
	for _, t := range lbTargets(p) {
		fmt.Fprintf(&b, "| %s | %s | %s |\n", t.name, t.measured, t.verdict)
	}
	return b.String()
}

// lbTargets judges hapsuper's cells behind the balancer: no failure, every
// drain lb-marked-down, and its median drain against sleep-N's there.
func lbTargets(p *lbPart) []target {
	var hs, sn []cellResult
	for _, c := range p.cells {
		switch {
		case c.strat.kind == stratHapsuper:
			hs = append(hs, c)
		case c.strat.kind == stratSleep && c.strat.sleep == p.sleepN:
			sn = append(sn, c)
		}
	}
	if len(hs) == 0 {
		return nil
	}
	failed, drains, marked := 0, 0, 0
	var notMarked []string
	for _, c := range hs {
		failed += c.failed()
		for _, pr := range c.pods {
			drains++
			if pr.reason == "lb-marked-down" {
				marked++
			} else {
				notMarked = append(notMarked, fmt.Sprintf("%s: %s", c, cmpOr(pr.reason, "none")))
			}
		}
	}
	out := []target{
		{"hapsuper behind the balancer: 0 failed requests", fmt.Sprintf("%d failed in %d cells", failed, len(hs)), verdict(failed == 0, "")},
		{"hapsuper behind the balancer: every drain lb-marked-down", fmt.Sprintf("%d of %d", marked, drains), verdict(marked == drains, strings.Join(notMarked, "; "))},
	}
	if len(sn) > 0 {
		h, s := median(allDrains(hs)), median(allDrains(sn))
		out = append(out, target{fmt.Sprintf("median drain, hapsuper against sleep-N (%v) behind the balancer", p.sleepN),
			fmt.Sprintf("%s s against %s s: %.2f×", secs(h), secs(s), s.Seconds()/h.Seconds()), "measured"})
	}
	return out
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// balancerResults is where a -balancer-only run writes.
func balancerResults(dir string) string { return filepath.Join(dir, "BALANCER.md") }
