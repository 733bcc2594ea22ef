package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/hapsuper/hapsuper/test/harness"
)

// podResult is one old pod's stop in a rollout.
type podResult struct {
	name, node string
	strat      strategy
	deleted    time.Time            // the API delete returned; the kubelet's stop starts here
	signal     time.Time            // SIGTERM (hapsuper) or SIGUSR1 (plain HAProxy) sent
	soft       time.Time            // soft stop: SIGUSR1 sent, or hapsuper's "soft stop"
	ended      time.Time            // hapsuper's "drain ended"; the soft stop for plain HAProxy
	master     time.Time            // HAProxy master exit
	withdrawn  time.Time            // withdrawal confirmed: hapsuper's log, or the last node's rules
	hapsuperW  time.Time            // hapsuper's first routing state=withdrawn after the stop (zero otherwise)
	nodeRules  map[string]time.Time // per node: the first listing without the pod ended
	nodeSeen   map[string]time.Time // per node: the last listing with it began (rules.withdrawalWatch)
	reason     string               // hapsuper's drain reason
	detail     string               // and its detail
	late       int                  // new connections sent after withdrawn that the pod answered (-1: not counted)
	killed     bool                 // the grace period ended it (SIGKILL)
	code       int                  // the container's exit code
	usage      usage                // hapsuper's RSS and CPU while serving (before the stop)
}

// drain is the stop → HAProxy master exit time.
func (p podResult) drain() time.Duration { return p.master.Sub(p.deleted) }

// cellResult is what one rollout measured.
type cellResult struct {
	cell
	start, end time.Time
	outcomes   []harness.Outcome
	pods       []podResult
}

func (c cellResult) failures() map[harness.Kind]int {
	m := map[harness.Kind]int{}
	for _, o := range c.outcomes {
		if o.Kind != harness.KindOK {
			m[o.Kind]++
		}
	}
	return m
}

func (c cellResult) failed() int {
	n := 0
	for _, v := range c.failures() {
		n += v
	}
	return n
}

// Rollout timing.
const (
	warmUp   = time.Second // traffic before the first replacement
	tailTime = time.Second // traffic after the last old pod exited
)

// ensurePods makes the current replicas, one per node, run strategy s:
// kept when the container is the same, else replaced without measurement.
func (r *runner) ensurePods(ctx context.Context, s strategy) error {
	if len(r.cur) > 0 && sameProcess(r.cur[0].strat, s) {
		for _, p := range r.cur {
			p.strat = s
		}
		return nil
	}
	var next []*benchPod
	for i := range r.env.H.Nodes() {
		p, err := r.newReplica(ctx, i+1, s)
		if err != nil {
			return err
		}
		if err := r.markReady(ctx, p); err != nil {
			return err
		}
		next = append(next, p)
	}
	for _, old := range r.cur {
		old.Kill()
		if err := r.env.H.FinishPod(ctx, old.Pod); err != nil {
			return err
		}
	}
	r.cur = next
	return nil
}

// newReplica starts a replica of strategy s on node.
func (r *runner) newReplica(ctx context.Context, node int, s strategy) (*benchPod, error) {
	r.seq++
	return r.startPod(ctx, node, fmt.Sprintf("%s-%d", s.short(), r.seq), s, map[string]string{"app": serviceName})
}

// markReady is the kubelet's Ready.
func (r *runner) markReady(ctx context.Context, p *benchPod) error {
	if err := r.env.H.SetPodReady(ctx, p.Pod, true); err != nil {
		return err
	}
	p.readyAt, p.readyTicks = time.Now(), harness.CPUTicks(p.Pid())
	return nil
}

// runCell runs one rollout of c; the replacements run strategy next (the
// following cell's, so they need no replacing). It fails when it cannot
// roll out; trouble after the pods were deleted is printed as a warning.
func (r *runner) runCell(ctx context.Context, c cell, next strategy) (cellResult, error) {
	if err := r.readyPods(ctx, c.strat); err != nil {
		return cellResult{}, err
	}
	nodes := r.env.H.Nodes()

	res := cellResult{cell: c, start: time.Now()}
	tr := startTraffic(c.pat, nodes, r.env.clusterIP)
	time.Sleep(warmUp)

	var stops, watches sync.WaitGroup
	var freezes freezer
	var faults injector
	var errMu sync.Mutex
	var errs []error
	var next2 []*benchPod
	for i, old := range r.cur {
		repl, err := r.newReplica(ctx, i+1, next)
		if err == nil {
			err = r.markReady(ctx, repl)
		}
		if err != nil {
			tr.Stop()
			return cellResult{}, err
		}
		next2 = append(next2, repl)
		time.Sleep(time.Duration(rand.IntN(31)) * time.Millisecond)
		if err := r.env.H.DeletePod(ctx, old.Pod, r.opts.grace); err != nil {
			tr.Stop()
			return cellResult{}, err
		}
		old.deleted = time.Now()
		tr.deleted(old.deleted)
		if i == 0 && len(c.faults) > 0 {
			faults.start(c.faults, old.deleted, r.env.H, r.cur)
		}
		if c.frozen {
			for _, n := range nodes {
				if n != old.Node {
					freezes.freeze(n, r.opts.freeze)
				}
			}
		}
		old.nodeRules, old.nodeSeen = map[string]time.Time{}, map[string]time.Time{}
		var rulesMu sync.Mutex
		wctx, wcancel := context.WithTimeout(ctx, r.opts.grace+5*time.Second)
		defer wcancel()
		for _, n := range nodes {
			watches.Go(func() {
				seen, gone := r.rules.withdrawalWatch(wctx, n, old.IP.String())
				rulesMu.Lock()
				old.nodeRules[n.Name], old.nodeSeen[n.Name] = gone, seen
				rulesMu.Unlock()
			})
		}
		stops.Go(func() {
			old.stop(r.opts.grace)
			var logErr error
			if r.opts.logDir != "" {
				logErr = writeFile(filepath.Join(r.opts.logDir, old.Name+".log"), old.Tail(1<<20)+"\n")
			}
			fctx, fcancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer fcancel()
			err := errors.Join(logErr, r.env.H.FinishPod(fctx, old.Pod))
			errMu.Lock()
			errs = append(errs, err)
			errMu.Unlock()
		})
	}
	stops.Wait()
	watches.Wait()
	if err := freezes.wait(); err != nil {
		errs = append(errs, err)
	}
	if err := faults.wait(); err != nil {
		errs = append(errs, err)
	}
	r.endCell(&res, tr)
	r.cur = next2
	// The rollout was measured: what failed around it (removing a Pod
	// object, thawing a kube-proxy) is reported and the run goes on.
	if err := errors.Join(errs...); err != nil {
		r.printf("  warning: %v: %v\n", c, err)
	}
	return res, nil
}

// readyPods makes the current replicas run s (ensurePods) and waits until
// every node's rules send to them and to nothing else: pods that
// ensurePods replaced were killed, not drained.
func (r *runner) readyPods(ctx context.Context, s strategy) error {
	if err := r.ensurePods(ctx, s); err != nil {
		return err
	}
	var ips []string
	for _, p := range r.cur {
		ips = append(ips, p.IP.String())
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err := r.rules.waitExactly(wctx, r.env.H.Nodes(), ips...)
	if err == nil || ctx.Err() != nil {
		return err
	}
	// A kube-proxy that a fault of the rollout before left behind (its
	// informers in client-go's backoff after a restart the apiserver could
	// not see) is restarted once, said, and waited for again; the rollout
	// has not begun, so nothing it measures is touched.
	for _, n := range r.env.H.Nodes() {
		got, gerr := r.rules.endpoints(ctx, n)
		if gerr == nil && len(got) == len(ips) && hasAll(got, ips) {
			continue
		}
		r.printf("  warning: %v; restarting %s's kube-proxy, whose log ends:\n%s\n", err, n.Name, indent(n.KubeProxy.Process().LogTail(8), "    "))
		if rerr := errors.Join(n.KubeProxy.Stop(), n.KubeProxy.Start()); rerr != nil {
			return errors.Join(err, rerr)
		}
	}
	wctx2, cancel2 := context.WithTimeout(ctx, 30*time.Second)
	defer cancel2()
	return r.rules.waitExactly(wctx2, r.env.H.Nodes(), ips...)
}

// indent prefixes every line of s with pre.
func indent(s, pre string) string {
	return pre + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n"+pre)
}

// endCell lets the clients run tailTime more, stops them, and records what
// the cell's old pods (r.cur) did: when each was withdrawn (hapsuper's
// verdict, else when the last node's rules, or the balancer, dropped it)
// and the new connections that reached it after.
func (r *runner) endCell(res *cellResult, tr *traffic) {
	time.Sleep(tailTime)
	tr.Stop()
	res.end = time.Now()
	res.outcomes = tr.Outcomes()
	for _, old := range r.cur {
		rec := old.podResult
		rec.withdrawn = rec.hapsuperW
		if rec.strat.kind != stratHapsuper {
			rec.withdrawn = lastOf(rec.nodeRules)
		}
		rec.late = lateHits(res.outcomes, res.pat, rec.name, rec.withdrawn)
		res.pods = append(res.pods, rec)
	}
}

// lateHits counts the requests sent after withdrawn that pod answered, for
// the patterns that open a connection per request (a kept-alive
// connection may rightly reach the pod after the withdrawal); -1 otherwise.
func lateHits(out []harness.Outcome, pat pattern, pod string, withdrawn time.Time) int {
	if pat == patKeepAlive || pat == patH2 || pat == patIdlePool || withdrawn.IsZero() {
		return -1
	}
	n := 0
	for _, o := range out {
		if o.Pod == pod && o.Sent.After(withdrawn) {
			n++
		}
	}
	return n
}

// String is the pod's stop, in seconds after its delete.
func (p podResult) String() string {
	rel := func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return secs(t.Sub(p.deleted))
	}
	var rules []string
	for _, n := range sortedKeys(p.nodeRules) {
		// the drop lies after the last listing that found the pod began
		rules = append(rules, n+" "+rel(p.nodeSeen[n])+"…"+rel(p.nodeRules[n]))
	}
	return fmt.Sprintf("%s on %s: signal %s, rules withdrawn [%s], hapsuper withdrawn %s, drain ended %s (%s), soft stop %s, master exit %s, code %d, late %d",
		p.name, p.node, rel(p.signal), strings.Join(rules, ", "), rel(p.hapsuperW), rel(p.ended), p.reason, rel(p.soft), rel(p.master), p.code, p.late)
}

// latestOf is the latest time in m, skipping zeros; zero when all are.
func latestOf(m map[string]time.Time) time.Time {
	var last time.Time
	for _, t := range m {
		if t.After(last) {
			last = t
		}
	}
	return last
}

// lastOf is the latest of the times, zero if any is zero (never seen).
func lastOf(m map[string]time.Time) time.Time {
	var last time.Time
	for _, t := range m {
		if t.IsZero() {
			return time.Time{}
		}
		if t.After(last) {
			last = t
		}
	}
	return last
}
