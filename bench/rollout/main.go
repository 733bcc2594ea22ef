// Command rollout is hapsuper's rollout benchmark: rolling updates of an
// HAProxy Service through real kube-proxy, hapsuper against the stop
// strategies in use today, side by side, plus what hapsuper costs.
//
//	cd bench && go run ./rollout            # the full run, ~15 minutes (make bench)
//	cd bench && go run ./rollout --smoke    # quiet + hapsuper, one pattern, ~2 minutes (make bench-smoke)
//	cd bench && go run ./rollout -soak 100  # 100 consecutive hapsuper drains per client pattern, ~45 minutes (make soak)
//
// It runs, in one process and in this order: HAProxy req/s bare and under
// hapsuper (bench/throughput, needs wrk); the kube-proxy confirmation
// fan-out (fanout.go, no cluster); the rollout matrix on a k8stest cluster
// of 2 nodes (strategies × client patterns × kube-proxy live or the other
// node's frozen for 4 s at each delete; matrix.go); the scale check, RSS
// with 0 and 10,000 EndpointSlices (scale.go). -soak N runs only the soak
// (soak.go). Flags select parts (see -help).
//
// It writes bench/rollout/RESULTS.md (or SOAK.md) and the timeline of one
// drain per strategy to docs/rollout-timeline.svg and .png; a smoke run
// writes them to $TMPDIR/hapsuper-rollout-smoke/ instead.
//
// It needs what the k8s tests need (root, iproute2, nftables, iptables,
// conntrack, the binaries of hack/k8s-binaries.sh) and haproxy. It only
// sends traffic to 127.0.0.0/8 and to the network namespaces it creates.
// It is a benchmark, not a test: it fails only when it cannot measure,
// never because a target was missed.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/hapsuper/hapsuper/conf"
	"github.com/hapsuper/hapsuper/test/harness"
)

// options shape one run.
type options struct {
	smoke          bool
	grace          time.Duration
	freeze         time.Duration
	frozen         bool   // run the frozen kube-proxy cells
	live           bool   // run the live kube-proxy cells
	proxyStates    string // -kube-proxy: both, live or frozen
	patterns       []pattern
	strategies     []strategy
	candidates     []time.Duration // sleep-N candidates
	fanout         int             // simulated nodes; 0: skip
	fanoutOnly     bool            // stop after the fan-out part (no cluster)
	fanoutBaseline time.Duration   // the observer's baseline period while serving; 0: none
	fanoutIdle     time.Duration   // the window its cost while serving is measured over
	slices         int             // EndpointSlices of the scale check; 0: skip
	tpRounds       int             // throughput rounds; 0: skip
	results        string          // RESULTS.md path ("" : module default)
	picture        string          // timeline SVG path ("" : module default)
	verbose        bool
	logDir         string          // where each stopped pod's container log goes ("": nowhere)
	soak           int             // drains per soak row; 0: the matrix, not the soak
	balancer       bool            // run the balancer part (balancer.go)
	balancerOnly   bool            // run only the balancer part
	lbCandidates   []time.Duration // sleep-N candidates behind the balancer
	lbStrategies   []strategy      // the strategies behind the balancer after the search
	campaign       int             // drains of the fault campaign; 0: no campaign
	seed           uint64          // the campaign's seed; 0: from the clock
	campaignSeed   uint64          // replay the one rollout of this seed
	campaignReport string          // drain files to report together; "": none
	proxyMode      string          // kube-proxy's mode: nftables or iptables
	metrics        bool            // kube-proxy's metrics on the node address, read by hapsuper
}

func main() {
	if childMode() {
		return
	}
	var o options
	flag.BoolVar(&o.smoke, "smoke", false, "short run: quiet + hapsuper, new connections, live kube-proxy, 100-node fan-out, no throughput, no scale check")
	flag.DurationVar(&o.grace, "grace", 20*time.Second, "the pods' grace period")
	flag.IntVar(&o.fanout, "fanout-nodes", 1000, "simulated kube-proxies of the fan-out part (0 skips it)")
	flag.BoolVar(&o.fanoutOnly, "fanout-only", false, "run the fan-out part alone, without a cluster, and print its figures")
	flag.DurationVar(&o.fanoutIdle, "fanout-idle", baselineIdle, "the window over which the fan-out observer's cost while serving is measured (its CPU: a longer one for finer figures)")
	flag.DurationVar(&o.fanoutBaseline, "fanout-baseline", conf.DefaultKubeProxyBaselinePeriod, "the fan-out observer's baseline period while serving (--kube-proxy-baseline-period): the stop comes once every node was asked and the idle cost measured; 0: no baseline before the stop")
	flag.IntVar(&o.slices, "slices", 10000, "EndpointSlices of the scale check (0 skips it)")
	flag.IntVar(&o.tpRounds, "throughput-rounds", 5, "A/B rounds of the req/s part (0 skips it)")
	flag.StringVar(&o.results, "results", "", "where to write the Markdown results (default bench/rollout/RESULTS.md; with --smoke, $TMPDIR/hapsuper-rollout-smoke/)")
	flag.StringVar(&o.picture, "picture", "", "where to write the timeline SVG, and a PNG beside it (default docs/rollout-timeline.svg; with --smoke, beside the results)")
	pats := flag.String("patterns", "", "comma list of client patterns (default all: "+joinPatterns(allPatterns)+")")
	strats := flag.String("strategies", "", "comma list of strategies: immediate, sleep-<duration>, quiet, hapsuper, hapsuper-wq<duration> (default all, hapsuper-wq2s (the quiet period once withdrawn, the default before 500ms) among them, with the sleep-N search; setting it turns the search off)")
	flag.StringVar(&o.proxyStates, "kube-proxy", "", "kube-proxy states to run: both, live or frozen (default both; with -soak, live)")
	flag.IntVar(&o.soak, "soak", 0, "run only the soak: this many consecutive drains per client pattern (hapsuper, live kube-proxy unless -strategies or -kube-proxy say otherwise), results in bench/rollout/SOAK.md")
	flag.BoolVar(&o.balancer, "balancer", true, "run the rollouts behind a health-checking load balancer (externalTrafficPolicy Local) after the matrix")
	flag.BoolVar(&o.balancerOnly, "balancer-only", false, "run only the rollouts behind the load balancer, results in bench/rollout/BALANCER.md")
	flag.BoolVar(&o.metrics, "kube-proxy-metrics", false, "run kube-proxy with its metrics on the node address and the hapsuper strategies with --kube-proxy-metrics-port (the metrics witness), and the fan-out with the simulated kube-proxies' metrics; the matrix's and the campaign's reports say which")
	flag.StringVar(&o.proxyMode, "proxy-mode", "nftables", "kube-proxy's mode on the nodes: nftables or iptables")
	flag.IntVar(&o.campaign, "campaign", 0, "run only the fault campaign: this many hapsuper drains with random faults, results in bench/rollout/CAMPAIGN.md")
	flag.Uint64Var(&o.seed, "seed", 0, "the campaign's seed (default: from the clock; printed)")
	flag.Uint64Var(&o.campaignSeed, "campaign-seed", 0, "replay the one campaign rollout of this seed (as CAMPAIGN.md lists it)")
	flag.StringVar(&o.campaignReport, "campaign-report", "", "comma list of campaign drain files (<results>.jsonl): write one report of them all to -results, run nothing")
	flag.BoolVar(&o.verbose, "v", false, "print each pod's stop times and the harness's own log lines")
	flag.StringVar(&o.logDir, "logs", "", "write each stopped pod's container log (hapsuper's JSON, or HAProxy's) to this directory")
	flag.Parse()
	o, err := o.withDefaults(*pats, *strats)
	if err != nil {
		fmt.Fprintln(os.Stderr, "rollout:", err)
		os.Exit(2)
	}
	err = harness.Run(os.Stderr, o.verbose, func(p *harness.Program) error { return runBench(p, o, os.Stdout) })
	harness.RemoveBinary()
	if err != nil {
		fmt.Fprintln(os.Stderr, "rollout:", err)
		os.Exit(1)
	}
}

// withDefaults fills what the flags leave to the mode.
func (o options) withDefaults(pats, strats string) (options, error) {
	o.freeze = 4 * time.Second
	o.frozen, o.live = true, true
	o.patterns = allPatterns
	o.strategies = []strategy{immediate(), sleepFor(5 * time.Second), quiet(), hapsuperS(), hapsuperWQ(quietPeriod)}
	o.candidates = []time.Duration{time.Second, 2 * time.Second, 3 * time.Second, 5 * time.Second, 8 * time.Second}
	o.lbCandidates = []time.Duration{time.Second, 2 * time.Second, 3 * time.Second, 5 * time.Second, 8 * time.Second}
	if o.smoke {
		o.balancer = false
		o.frozen, o.live = false, true
		o.patterns = []pattern{patNewConns}
		o.strategies = []strategy{quiet(), hapsuperS()}
		o.candidates = nil
		o.fanout = min(o.fanout, 100)
		o.slices = 0
		o.tpRounds = 0
	}
	if o.soak < 0 {
		return o, fmt.Errorf("-soak %d: give a number of drains above 0, or leave it out for the matrix", o.soak)
	}
	o.lbStrategies = []strategy{quiet(), toldTheWindow(hapsuperS())}
	if o.balancerOnly {
		o.balancer = true
		o.fanout, o.slices, o.tpRounds = 0, 0, 0
		o.patterns = []pattern{patNewConns, patPause, patKeepAlive, patH2}
	}
	if o.proxyMode == "" {
		o.proxyMode = "nftables"
	}
	if o.proxyMode != "nftables" && o.proxyMode != "iptables" {
		return o, fmt.Errorf("-proxy-mode %q: use nftables or iptables", o.proxyMode)
	}
	if o.campaign < 0 {
		return o, fmt.Errorf("-campaign %d: give a number of drains above 0", o.campaign)
	}
	if o.campaign > 0 {
		o.balancer = false
		o.fanout, o.slices, o.tpRounds = 0, 0, 0
		o.frozen = false
		if o.seed == 0 {
			o.seed = uint64(time.Now().UnixNano())
		}
	}
	if o.soak > 0 {
		o.balancer = false
		o.strategies = []strategy{hapsuperS()}
		o.candidates = nil
		o.fanout, o.slices, o.tpRounds = 0, 0, 0
		if o.proxyStates == "" {
			o.proxyStates = "live"
		}
	}
	if pats != "" {
		o.patterns = nil
		for p := range strings.SplitSeq(pats, ",") {
			p := pattern(strings.TrimSpace(p))
			if !slices.Contains(allPatterns, p) {
				return o, fmt.Errorf("unknown pattern %q in -patterns: use %s", p, joinPatterns(allPatterns))
			}
			o.patterns = append(o.patterns, p)
		}
	}
	if strats != "" {
		o.strategies, o.candidates, o.lbCandidates, o.lbStrategies = nil, nil, nil, nil
		for name := range strings.SplitSeq(strats, ",") {
			s, err := parseStrategy(strings.TrimSpace(name))
			if err != nil {
				return o, err
			}
			o.strategies = append(o.strategies, s)
			o.lbStrategies = append(o.lbStrategies, toldTheWindow(s))
		}
	}
	switch o.proxyStates {
	case "both", "":
	case "live":
		o.frozen = false
	case "frozen":
		o.live = false
	default:
		return o, fmt.Errorf("-kube-proxy %q: use both, live or frozen", o.proxyStates)
	}
	return o, nil
}

func joinPatterns(ps []pattern) string {
	var s []string
	for _, p := range ps {
		s = append(s, string(p))
	}
	return strings.Join(s, ",")
}

// runner carries one run's state.
type runner struct {
	t     harness.TB
	opts  options
	out   io.Writer
	env   *env
	rules rules
	cur   []*benchPod // the Service's current replicas, node1 first
	seq   int
}

func (r *runner) printf(format string, args ...any) { fmt.Fprintf(r.out, format, args...) }

// runBench runs everything with t as the harness's test: a *testing.T in
// smoke_test.go, a harness.Program from main.
func runBench(t harness.TB, o options, out io.Writer) (err error) {
	began := time.Now()
	root, err := harness.Root()
	if err != nil {
		return err
	}
	// A smoke run leaves the committed results alone.
	resultsDir, pictureDir := filepath.Join(root, "bench", "rollout"), filepath.Join(root, "docs")
	if o.smoke {
		resultsDir = filepath.Join(os.TempDir(), "hapsuper-rollout-smoke")
		pictureDir = resultsDir
	}
	if o.results == "" {
		o.results = filepath.Join(resultsDir, "RESULTS.md")
		if o.soak > 0 {
			o.results = filepath.Join(resultsDir, "SOAK.md")
		}
		if o.balancerOnly {
			o.results = balancerResults(resultsDir)
		}
		if o.campaign > 0 {
			o.results = filepath.Join(resultsDir, "CAMPAIGN.md")
		}
	}
	if o.picture == "" {
		o.picture = filepath.Join(pictureDir, "rollout-timeline.svg")
	}
	r := &runner{t: t, opts: o, out: out}
	r.rules.mode = o.proxyMode
	r.printf("building hapsuper\n")
	bin, err := harness.Binary()
	if err != nil {
		return err
	}
	var x extras
	x.smoke = o.smoke
	x.metrics = o.metrics
	if o.tpRounds > 0 {
		r.printf("throughput: %d A/B rounds of HAProxy bare and under hapsuper (bench/throughput)\n", o.tpRounds)
		if x.throughput, err = runThroughput(root, bin, o.tpRounds, out); err != nil {
			return err
		}
	}
	if o.fanout > 0 {
		r.printf("fan-out: routing.Observer against %d simulated kube-proxies, metrics witness %s\n", o.fanout, onOff(o.metrics))
		if x.fanout, err = runFanout(o.fanout, o.metrics, o.fanoutBaseline, o.fanoutIdle); err != nil {
			return err
		}
		f := x.fanout
		r.printf("  nodes %d, confirmed %s s after the last sync\n", f.nodes, secs(f.confirmAfter))
		r.printf("  %s\n", f.healthz.describe("healthz", f.nodes))
		if f.metrics {
			r.printf("  %s\n", f.metricsReqs.describe("metrics", f.nodes))
		}
		r.printf("  in flight at most %d (both endpoints), %d to one node; the child's CPU time %.2f s (%.0f µs a node) from the stop to the confirmation\n",
			f.maxInFlight, f.maxPerNode, f.cpu.Seconds(), float64(f.cpu.Microseconds())/float64(f.nodes))
		if b := f.baseline; b != nil {
			if b.period > 0 {
				r.printf("  baseline while serving (period %s): every node asked %s after the watch synced; %d requests over %d connections before the stop, at most %d from one node\n",
					b.period, b.covered.Round(100*time.Millisecond), b.requests, b.conns, b.maxConns)
			}
			r.printf("  cost while serving (baseline %s) over %s: %d requests (%.1f a second), the child's CPU %.1f ms (%.3f %% of a core, %.0f µs a request); live heap %+.1f MB (%.0f bytes a node); RSS %.1f MB when synced, %.1f MB before the stop: %+.1f MB\n",
				onOff(b.period > 0), b.idleWindow, b.idleReqs, float64(b.idleReqs)/b.idleWindow.Seconds(), float64(b.idleCPU.Microseconds())/1000,
				100*b.idleCPU.Seconds()/b.idleWindow.Seconds(), float64(b.idleCPU.Microseconds())/float64(max(b.idleReqs, 1)),
				float64(b.heapBytes)/(1<<20), float64(b.heapBytes)/float64(f.nodes),
				float64(b.rssBeforeKB)/1024, float64(b.rssKB)/1024, float64(b.rssKB-b.rssBeforeKB)/1024)
			r.printf("  child RSS %.1f MB when synced, %.1f MB once confirmed: %+.1f MB (%+.1f MB from the stop)\n",
				float64(b.rssBeforeKB)/1024, float64(f.rssKB)/1024, float64(f.rssKB-b.rssBeforeKB)/1024, float64(f.rssKB-f.syncedKB)/1024)
		} else {
			r.printf("  child RSS %.1f MB before the stop, %.1f MB once confirmed: %+.1f MB\n",
				float64(f.syncedKB)/1024, float64(f.rssKB)/1024, float64(f.rssKB-f.syncedKB)/1024)
		}
	}
	if o.fanoutOnly {
		return nil
	}

	ctx := context.Background()
	r.printf("cluster: starting etcd, kube-apiserver, kube-controller-manager, 2 nodes with %s kube-proxy%s\n", o.proxyMode, map[bool]string{true: ", its metrics on the node address", false: ""}[o.metrics])
	if r.env, err = newEnv(ctx, t, 2, o.proxyMode, o.metrics); err != nil {
		return err
	}
	if o.soak > 0 {
		rows, err := r.runSoak(ctx, o.soak)
		if err != nil && len(rows) == 0 {
			return err
		}
		flags := fmt.Sprintf("-soak %d -kube-proxy %s", o.soak, o.proxyStates) + metricsFlag(o.metrics)
		table := soakReport(rows, o.soak, flags, o.grace, time.Since(began), o.smoke)
		if err != nil {
			// The rows done so far are kept, marked as a run that stopped.
			table += fmt.Sprintf("\n**The run stopped before its last row:** %v\n", err)
		}
		if werr := writeFile(o.results, table); werr != nil {
			return werr
		}
		if err != nil {
			r.printf("\n%s\nwrote the rows done to %s\n", table, o.results)
			return err
		}
		r.printf("\n%s\nwrote %s in %v\n", table, o.results, time.Since(began).Round(time.Second))
		return nil
	}
	if o.campaignReport != "" {
		ds, parts, err := readDrains(strings.Split(o.campaignReport, ","))
		if err != nil {
			return err
		}
		table := campaignMerged(ds, parts)
		if err := writeFile(o.results, table); err != nil {
			return err
		}
		r.printf("%s\nwrote %s\n", table, o.results)
		return nil
	}
	if o.campaign > 0 {
		r.printf("campaign: %d drains, seed %d\n", o.campaign, o.seed)
		flags := fmt.Sprintf("-campaign %d -seed %d -proxy-mode %s", o.campaign, o.seed, o.proxyMode) + metricsFlag(o.metrics)
		jsonl := strings.TrimSuffix(o.results, ".md") + ".jsonl"
		ds, err := r.runCampaign(ctx, o.campaign, o.seed, func(ds []campaignDrain) {
			table := campaignReport(ds, o.seed, flags, time.Since(began)) +
				fmt.Sprintf("\n**Running: %d of %d drains so far.**\n", len(ds), o.campaign)
			if werr := errors.Join(writeFile(o.results, table), writeDrains(jsonl, flags, ds)); werr != nil {
				r.printf("campaign: %v\n", werr)
			}
		})
		if err != nil && len(ds) == 0 {
			return err
		}
		if werr := writeDrains(jsonl, flags, ds); werr != nil {
			return werr
		}
		table := campaignReport(ds, o.seed, flags, time.Since(began)) + "\n" + r.syncsSeen()
		if err != nil {
			table += fmt.Sprintf("\n**The campaign stopped before its last drain:** %v\n", err)
		}
		if werr := writeFile(o.results, table); werr != nil {
			return werr
		}
		r.printf("\n%s\nwrote %s in %v\n", table, o.results, time.Since(began).Round(time.Second))
		return err
	}
	if o.balancerOnly {
		part, err := r.runBalancer(ctx)
		if err != nil {
			return err
		}
		table := fmt.Sprintf("# Rollout benchmark behind a load balancer\n\nGenerated by `cd bench && go run ./rollout -balancer-only` in %v; pods' grace %v.\n", time.Since(began).Round(time.Second), o.grace) +
			lbReport(part)
		if err := writeFile(o.results, table); err != nil {
			return err
		}
		r.printf("\n%s\nwrote %s in %v\n", table, o.results, time.Since(began).Round(time.Second))
		return nil
	}
	m, err := r.runMatrix(ctx)
	if err != nil {
		return err
	}
	var part *lbPart
	if o.balancer {
		r.printf("balancer: rollouts behind a health-checking load balancer\n")
		if part, err = r.runBalancer(ctx); err != nil {
			return err
		}
	}
	if o.slices > 0 {
		r.printf("scale: hapsuper RSS with 0 and %d EndpointSlices\n", o.slices)
		if x.scale, err = r.runScale(ctx, o.slices); err != nil {
			return err
		}
	}
	x.total = time.Since(began)
	table := report(m, x, o.grace)
	if part != nil {
		table += lbReport(part)
	}
	if err := writeFile(o.results, table); err != nil {
		return err
	}
	if err := drawTimeline(m, o.picture, o.smoke); err != nil {
		return err
	}
	r.printf("\n%s\nwrote %s and %s (+ .png) in %v\n", table, o.results, o.picture, x.total.Round(time.Second))
	return nil
}

// writeFile writes content to path, creating its directory.
func writeFile(path, content string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("create directory of %s: %w", path, err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
