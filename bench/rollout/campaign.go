package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hapsuper/hapsuper/test/k8s/k8stest"
)

// The campaign (-campaign N): hapsuper's drains on the real harness, each
// rollout with faults drawn at random (seeded, printed) from what real
// clusters combine: a kube-proxy frozen, restarted, restarted with a slow
// first sync (the apiserver out of its reach for a while), its healthz
// filtered, the apiserver frozen or restarted, a reload of the draining
// pod's HAProxy, over the client patterns, at random instants from the
// first delete to the bound. Faults on one process (a node's kube-proxy,
// the apiserver) are played one after the other, so that a restart does
// not meet its own freeze; before each rollout's first delete the run
// waits for the EndpointSlice controller to answer a probe (sliceprobe.go).
// Per drain it records the faults, the verdict, the failed requests, the
// requests on fresh connections that reached the pod after hapsuper's
// withdrawn verdict, and the late arrivals hapsuper's own audit counted;
// CAMPAIGN.md lists the totals, the verdicts per fault, and every
// drain that failed a request or claimed too much, with its rollout's seed
// so that it can be replayed (-campaign-seed).

// faultKind is one kind of fault.
type faultKind string

const (
	faultFreeze     faultKind = "kube-proxy frozen"
	faultRestart    faultKind = "kube-proxy restarted"
	faultSlowSync   faultKind = "kube-proxy slow first sync"
	faultFilter     faultKind = "healthz filtered"
	faultAPI        faultKind = "apiserver frozen"
	faultAPIRestart faultKind = "apiserver restarted"
	faultReload     faultKind = "reload"
)

var faultKinds = []faultKind{faultFreeze, faultRestart, faultSlowSync, faultFilter, faultAPI, faultAPIRestart, faultReload}

// target is what a fault acts on; faults on one target are played in turn.
func (f fault) target() string {
	switch f.kind {
	case faultAPI, faultAPIRestart:
		return "apiserver"
	case faultFreeze, faultRestart, faultSlowSync:
		return fmt.Sprintf("kube-proxy %d", f.node)
	case faultFilter:
		return fmt.Sprintf("healthz %d", f.node)
	}
	return fmt.Sprintf("pod %d", f.node)
}

// fault is one fault of a rollout: what, on which node (1-based; the pod
// for a reload), from when after the first delete and for how long.
type fault struct {
	kind faultKind
	node int
	at   time.Duration
	for_ time.Duration
}

func (f fault) String() string {
	s := fmt.Sprintf("%s on node%d at +%.1fs", f.kind, f.node, f.at.Seconds())
	switch f.kind {
	case faultReload:
		s = fmt.Sprintf("reload of the pod on node%d at +%.1fs", f.node, f.at.Seconds())
	case faultAPI, faultAPIRestart:
		s = fmt.Sprintf("%s at +%.1fs", f.kind, f.at.Seconds())
	}
	if f.for_ > 0 {
		s += fmt.Sprintf(" for %.1fs", f.for_.Seconds())
	}
	return s
}

// apiSettle is how long an apiserver restart's fault lasts after the
// apiserver is ready again.
const apiSettle = 15 * time.Second

// drainSpan is where a rollout's drains usually are, from the first
// delete: the second pod is deleted about a second after the first, and a
// routed-away drain lasts 1–2 s.
const drainSpan = 2500 * time.Millisecond

// drawFaults draws a rollout's faults: none to three, each at a random
// instant from the first delete (four in five within drainSpan, the others
// from there to bound), the timed ones lasting 0.5–5 s.
func drawFaults(rng *rand.Rand, nodes int, bound time.Duration) []fault {
	var out []fault
	for range rng.IntN(4) {
		f := fault{
			kind: faultKinds[rng.IntN(len(faultKinds))],
			node: 1 + rng.IntN(nodes),
		}
		if rng.IntN(5) < 4 || bound <= drainSpan {
			f.at = time.Duration(rng.Int64N(int64(drainSpan)))
		} else {
			f.at = drainSpan + time.Duration(rng.Int64N(int64(bound-drainSpan)))
		}
		switch f.kind {
		case faultFreeze, faultFilter, faultAPI, faultSlowSync:
			f.for_ = 500*time.Millisecond + time.Duration(rng.Int64N(int64(4500*time.Millisecond)))
		}
		out = append(out, f)
	}
	return out
}

// injector plays a rollout's faults and undoes them whatever happens.
type injector struct {
	wg      sync.WaitGroup
	mu      sync.Mutex
	errs    []error
	targets map[string]*sync.Mutex // one per fault target, made by start
}

// start schedules every fault relative to t0, the first delete.
func (in *injector) start(faults []fault, t0 time.Time, h *k8stest.Harness, pods []*benchPod) {
	in.targets = map[string]*sync.Mutex{}
	for _, f := range faults {
		if in.targets[f.target()] == nil {
			in.targets[f.target()] = &sync.Mutex{}
		}
	}
	for _, f := range faults {
		in.wg.Go(func() {
			time.Sleep(time.Until(t0.Add(f.at)))
			mu := in.targets[f.target()]
			mu.Lock()
			defer mu.Unlock()
			in.fail(f, in.apply(f, h, pods))
		})
	}
}

func (in *injector) apply(f fault, h *k8stest.Harness, pods []*benchPod) error {
	n := h.Node(f.node)
	switch f.kind {
	case faultFreeze:
		if err := n.KubeProxy.Freeze(); err != nil {
			return err
		}
		time.Sleep(f.for_)
		return n.KubeProxy.Thaw()
	case faultRestart:
		if err := n.KubeProxy.Stop(); err != nil {
			return err
		}
		return n.KubeProxy.Start()
	case faultSlowSync:
		// The node cannot reach the apiserver for a while from the
		// restart on: kube-proxy serves healthz but has nothing to sync.
		api := h.APIServer()
		table := fmt.Sprintf("hapsuper-campaign-sync-%d", f.node)
		if err := n.NFT(fmt.Sprintf("table ip %s {\n\tchain out { type filter hook output priority -10; policy accept; ip daddr %s tcp dport %d drop; }\n}\n", table, api.Addr(), api.Port())); err != nil {
			return err
		}
		err := n.KubeProxy.Stop()
		if err == nil {
			err = n.KubeProxy.Start()
		}
		time.Sleep(f.for_)
		return errors.Join(err, n.NFT("delete table ip "+table+"\n"))
	case faultAPIRestart:
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		if err := h.RestartAPIServer(ctx); err != nil {
			return err
		}
		// The control plane's clients (kube-proxy, the controllers) come
		// back with client-go's backoff, which an outage this long grows
		// to [30, 60) s: the sleep covers most returns, and the next
		// rollout waits for the EndpointSlice controller itself
		// (awaitSliceController).
		time.Sleep(apiSettle)
		return nil
	case faultFilter:
		table := fmt.Sprintf("hapsuper-campaign-%d", f.node)
		if err := n.NFT(fmt.Sprintf("table ip %s {\n\tchain in { type filter hook input priority -10; policy accept; tcp dport %d drop; }\n}\n", table, k8stest.HealthzPort)); err != nil {
			return err
		}
		time.Sleep(f.for_)
		return n.NFT("delete table ip " + table + "\n")
	case faultAPI:
		p := h.APIServerProcess()
		if err := p.Freeze(); err != nil {
			return err
		}
		time.Sleep(f.for_)
		return p.Thaw()
	case faultReload:
		for _, p := range pods {
			if p.Pod.Node == n && !p.Exited() {
				return p.Signal(syscall.SIGHUP)
			}
		}
	}
	return nil
}

func (in *injector) fail(f fault, err error) {
	if err == nil {
		return
	}
	in.mu.Lock()
	in.errs = append(in.errs, fmt.Errorf("%v: %w", f, err))
	in.mu.Unlock()
}

// wait returns once every fault was played and undone.
func (in *injector) wait() error {
	in.wg.Wait()
	in.mu.Lock()
	defer in.mu.Unlock()
	return errors.Join(in.errs...)
}

// campaignDrain is one drain of the campaign.
type campaignDrain struct {
	rollout int
	seed    uint64 // the rollout's seed: -campaign-seed replays its faults
	pat     pattern
	faults  []fault
	pod     podResult
	failed  int // failed requests of the rollout (both drains)
	audited int // late arrivals hapsuper's audit counted (from its detail)
	// rulesGone is when, after the delete, the last node's rules dropped
	// the pod (-1: not within the grace period); ended when the drain ended.
	rulesGone, ended time.Duration
	// rulesSeen is the latest start, after the delete, of a listing that
	// still found the pod in a node's rules (-1: none, or not recorded):
	// the last drop came after it (rules.withdrawalWatch).
	rulesSeen time.Duration
	// rulesFirstGone is when the first node's rules dropped the pod (-1:
	// none within the grace period, or not recorded).
	rulesFirstGone time.Duration
	// probe is how long the rollout waited for the EndpointSlice
	// controller before its first delete (-1: not recorded); probeTimedOut:
	// it went on after probeBound without an answer.
	probe         time.Duration
	probeTimedOut bool
}

// endedEarly says whether a withdrawn verdict's drain ended before the
// last node's rules dropped the pod: provably, when it ended before a
// listing that still found the pod began; possibly, when it ended before
// the listing that no longer found it ended.
func (d campaignDrain) endedEarly() (provably, possibly bool) {
	if d.pod.reason != "routed-away" && d.pod.reason != "lb-marked-down" || d.rulesGone < 0 {
		return false, false
	}
	return d.rulesSeen >= 0 && d.ended < d.rulesSeen, d.ended < d.rulesGone
}

// needlessBound: a drain that ended at the bound although every node's
// rules had dropped the pod at least a second before.
func (d campaignDrain) needlessBound() bool {
	return d.pod.reason == "bound" && d.rulesGone >= 0 && d.ended-d.rulesGone >= time.Second
}

// withdrawnRollouts are the rollouts whose every drain ended with a
// withdrawn verdict (routed-away or lb-marked-down).
func withdrawnRollouts(ds []campaignDrain) map[int]bool {
	out := map[int]bool{}
	for _, d := range ds {
		if _, seen := out[d.rollout]; !seen {
			out[d.rollout] = true
		}
		if d.pod.reason != "routed-away" && d.pod.reason != "lb-marked-down" {
			out[d.rollout] = false
		}
	}
	return out
}

// earlyParagraph says which withdrawn verdicts ended before the last rules
// drop, provably or within the bench's measurement of that drop.
func earlyParagraph(ds []campaignDrain) string {
	var provably, possibly []string
	withdrawnN, recorded := 0, false
	for _, d := range ds {
		if d.pod.reason != "routed-away" && d.pod.reason != "lb-marked-down" {
			continue
		}
		withdrawnN++
		recorded = recorded || d.rulesSeen >= 0
		p, q := d.endedEarly()
		what := fmt.Sprintf("rollout %d %s (ended +%.2fs, rules last found +%.2fs, gone by +%.2fs)", d.rollout, d.pod.name, d.ended.Seconds(), d.rulesSeen.Seconds(), d.rulesGone.Seconds())
		switch {
		case p:
			provably = append(provably, what)
		case q:
			possibly = append(possibly, what)
		}
	}
	if !recorded {
		return fmt.Sprintf("\nOf the %d withdrawn verdicts, %d ended before the first listing without the pod ended; these records do not hold when the last listing that found it began, so none can be told apart from the listings' own duration.\n", withdrawnN, len(possibly))
	}
	s := fmt.Sprintf("\nOf the %d withdrawn verdicts, %d ended provably before the last node's rules dropped the pod (before a listing that still found it began)", withdrawnN, len(provably))
	if len(provably) > 0 {
		s += ": " + strings.Join(provably, "; ")
	}
	s += fmt.Sprintf(", and %d while the drop was being measured (after the last listing that found it began, before the first that did not ended)", len(possibly))
	if len(possibly) > 0 {
		s += ": " + strings.Join(possibly, "; ")
	}
	return s + ".\n"
}

// claimedTooMuch: routed-away (or lb-marked-down) with requests on fresh
// connections reaching the pod after the verdict.
func (d campaignDrain) claimedTooMuch() bool {
	return (d.pod.reason == "routed-away" || d.pod.reason == "lb-marked-down") && d.pod.late > 0
}

// auditedRe reads the audit's count from a drain's detail.
var auditedRe = regexp.MustCompile(`(\d+) new connections arrived up to`)

// runCampaign runs rollouts until n drains are done, each with its own
// seed drawn from the campaign's, and hands the drains so far to
// checkpoint every 50 drains (a long campaign's report is on disk while it
// runs).
func (r *runner) runCampaign(ctx context.Context, n int, seed uint64, checkpoint func([]campaignDrain)) ([]campaignDrain, error) {
	master := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	var out []campaignDrain
	s := hapsuperS()
	bound := (r.opts.grace - 2*time.Second) * 2 / 3
	for i := 0; len(out) < n; i++ {
		rs := master.Uint64()
		if r.opts.campaignSeed != 0 {
			rs = r.opts.campaignSeed
		}
		rng := rand.New(rand.NewPCG(rs, rs^0x9e3779b97f4a7c15))
		pat := r.opts.patterns[rng.IntN(len(r.opts.patterns))]
		faults := drawFaults(rng, len(r.env.H.Nodes()), bound)
		c := cell{strat: s, pat: pat, faults: faults}
		r.printf("campaign rollout %d (seed %d): %s; faults: %s\n", i+1, rs, pat, faultList(faults))
		probe, answered := r.awaitSliceController(ctx, i+1)
		began := time.Now()
		res, err := r.runCell(ctx, c, s)
		if err != nil {
			return out, fmt.Errorf("campaign rollout %d (seed %d): %w", i+1, rs, err)
		}
		r.progress(res, time.Since(began))
		for _, p := range res.pods {
			d := campaignDrain{rollout: i + 1, seed: rs, pat: pat, faults: faults, pod: p, failed: res.failed(), rulesGone: -1, rulesSeen: -1, rulesFirstGone: -1,
				ended: p.ended.Sub(p.deleted), probe: probe, probeTimedOut: !answered}
			if gone := lastOf(p.nodeRules); !gone.IsZero() {
				d.rulesGone = gone.Sub(p.deleted)
			}
			if first := firstOf(p.nodeRules); !first.IsZero() {
				d.rulesFirstGone = first.Sub(p.deleted)
			}
			if seen := latestOf(p.nodeSeen); !seen.IsZero() {
				d.rulesSeen = seen.Sub(p.deleted)
			}
			if m := auditedRe.FindStringSubmatch(p.detail); m != nil {
				d.audited, _ = strconv.Atoi(m[1])
			}
			out = append(out, d)
			if len(out)%50 == 0 && len(out) < n {
				checkpoint(out)
			}
		}
		if r.opts.campaignSeed != 0 {
			break // one rollout replayed
		}
	}
	return out, nil
}

// firstOf is the earliest time in m, skipping zeros; zero when all are.
func firstOf(m map[string]time.Time) time.Time {
	var first time.Time
	for _, t := range m {
		if !t.IsZero() && (first.IsZero() || t.Before(first)) {
			first = t
		}
	}
	return first
}

func faultList(fs []fault) string {
	if len(fs) == 0 {
		return "none"
	}
	var s []string
	for _, f := range fs {
		s = append(s, f.String())
	}
	return strings.Join(s, "; ")
}

// campaignReport renders CAMPAIGN.md.
func campaignReport(ds []campaignDrain, seed uint64, flags string, total time.Duration) string {
	return fmt.Sprintf("# Fault campaign\n\nGenerated by `cd bench && go run ./rollout %s` (campaign seed %d) in %v. ", flags, seed, total.Round(time.Second)) +
		campaignBody(ds)
}

// campaignMerged renders the report of campaigns run in parts.
func campaignMerged(ds []campaignDrain, parts []string) string {
	return fmt.Sprintf("# Fault campaign\n\nGenerated by `cd bench && go run ./rollout -campaign-report ...` from %d parts: %s. ", len(parts), strings.Join(parts, "; ")) +
		campaignBody(ds)
}

// campaignBody is the report after its first words: the setup, the totals,
// the verdicts per fault and the drains that failed or claimed too much.
func campaignBody(ds []campaignDrain) string {
	var b strings.Builder
	fmt.Fprintf(&b, "The rollout benchmark's setup (two nodes, kube-proxy in the mode the flags name, a ClusterIP Service over two pods of HAProxy 2.6 under hapsuper, routing kube-proxy, clients in both node namespaces); "+
		"each rollout draws its client pattern and zero to three faults (%s) at random instants from the first delete (four in five within the first %v, where the drains are, the others up to the bound), the timed ones lasting 0.5–5 s (a slow first sync: kube-proxy restarted while its node cannot reach the apiserver, for that long; an apiserver restart: SIGTERM, start, ready, then %v for its clients to come back). "+
		"%sLate = requests on fresh connections sent after hapsuper's `routing state=withdrawn` and answered by the stopping pod; audited = the late arrivals hapsuper's own audit counted.\n\n",
		joinKinds(), drainSpan, apiSettle, probeSetup(ds))
	rollouts, failed, failedClaimed, late, audited, claimed := 0, 0, 0, 0, 0, 0
	seen := map[int]bool{}
	reasons := map[string]int{}
	withdrawn := withdrawnRollouts(ds)
	for _, d := range ds {
		if !seen[d.rollout] {
			seen[d.rollout] = true
			rollouts++
			failed += d.failed
			if withdrawn[d.rollout] {
				failedClaimed += d.failed
			}
		}
		if d.pod.late > 0 {
			late += d.pod.late
		}
		audited += d.audited
		if d.claimedTooMuch() {
			claimed++
		}
		reasons[d.pod.reason]++
	}
	b.WriteString("| drains | rollouts | failed requests | of them in rollouts whose every drain ended routed-away | late requests on fresh connections | drains routed-away with late requests | late arrivals the audit counted | verdicts |\n|--:|--:|--:|--:|--:|--:|--:|---|\n")
	fmt.Fprintf(&b, "| %d | %d | %d | %d | %d | %d | %d | %s |\n", len(ds), rollouts, failed, failedClaimed, late, claimed, audited, counts(reasons))
	b.WriteString(routedAwayParagraph(ds))
	b.WriteString(probeParagraph(ds))
	b.WriteString("\nA drain that ends `bound` soft-stops while some node may still route to the pod: the requests such a node then sends are refused, and the verdict says so. Failed requests in a rollout whose every drain ended routed-away would be hapsuper's to answer for.\n")

	var bounds, needless []campaignDrain
	for _, d := range ds {
		if d.pod.reason == "bound" {
			bounds = append(bounds, d)
			if d.needlessBound() {
				needless = append(needless, d)
			}
		}
	}
	fmt.Fprintf(&b, "\n%d drains ended at the bound; in %d of them every node's rules had dropped the pod at least 1 s before (a needless bound: hapsuper could not prove it)", len(bounds), len(needless))
	if len(needless) > 0 {
		var ex []string
		for _, d := range needless[:min(len(needless), 8)] {
			ex = append(ex, fmt.Sprintf("rollout %d %s: rules gone at +%.1fs, bound at +%.1fs, faults: %s", d.rollout, d.pod.name, d.rulesGone.Seconds(), d.ended.Seconds(), faultList(d.faults)))
		}
		fmt.Fprintf(&b, ": %s", strings.Join(ex, "; "))
	}
	b.WriteString(".\n")
	b.WriteString(earlyParagraph(ds))

	b.WriteString("\n## Verdicts per fault\n\nA drain counts under every fault of its rollout (\"none\": a rollout without faults).\n\n| fault | drains | verdicts | failed requests (of their rollouts) | late requests |\n|---|--:|---|--:|--:|\n")
	for _, k := range append([]faultKind{"none"}, faultKinds...) {
		n, f, l := 0, 0, 0
		rs := map[string]int{}
		counted := map[int]bool{} // a rollout's failed requests count once
		for _, d := range ds {
			has := slices.ContainsFunc(d.faults, func(x fault) bool { return x.kind == k }) || (k == "none" && len(d.faults) == 0)
			if !has {
				continue
			}
			n++
			rs[d.pod.reason]++
			if !counted[d.rollout] {
				counted[d.rollout] = true
				f += d.failed
			}
			l += max(d.pod.late, 0)
		}
		fmt.Fprintf(&b, "| %s | %d | %s | %d | %d |\n", k, n, counts(rs), f, l)
	}
	b.WriteString("\n## Drains that failed a request or claimed too much\n\n")
	any := false
	for _, d := range ds {
		if d.failed == 0 && !d.claimedTooMuch() {
			continue
		}
		any = true
		detail := d.pod.detail
		if r := []rune(detail); len(r) > 240 {
			detail = string(r[:240]) + "…"
		}
		fmt.Fprintf(&b, "- rollout %d, seed %d (`-campaign 1 -campaign-seed %d`), %s, %s: %s (%s); %d failed requests in the rollout, %d late, audit %d; faults: %s\n",
			d.rollout, d.seed, d.seed, d.pat, d.pod.name, d.pod.reason, detail, d.failed, d.pod.late, d.audited, faultList(d.faults))
	}
	if !any {
		b.WriteString("none.\n")
	}
	return b.String()
}

func joinKinds() string {
	var s []string
	for _, k := range faultKinds {
		s = append(s, string(k))
	}
	return strings.Join(s, ", ")
}
