package main

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hapsuper/hapsuper/conf"
	"github.com/hapsuper/hapsuper/routing"
	"github.com/hapsuper/hapsuper/test/harness"
)

// floor is the earliest a truthful drain of one pod may soft-stop: the
// later of the last node's rules dropping the pod (rules) and the end of
// the last request the pod answered that was sent before then (request: in
// flight while a node still routed to the pod). No drain that knows only
// what hapsuper can know ends before it; the soft stop's distance from it
// is what a drain costs beyond what the cluster forces.
type floor struct {
	rules   time.Time // the last node's rules without the pod
	request time.Time // the end of the pod's last request sent before rules; zero if none
}

// at is the floor's instant: the later of its two parts.
func (f floor) at() time.Time {
	if f.request.After(f.rules) {
		return f.request
	}
	return f.rules
}

// floorOf is pod's floor from its nodes' rules and the cell's outcomes;
// false when a node's rules were never seen without the pod.
func floorOf(pod podResult, out []harness.Outcome) (floor, bool) {
	rules := lastOf(pod.nodeRules)
	if rules.IsZero() {
		return floor{}, false
	}
	f := floor{rules: rules}
	for _, o := range out {
		if o.Kind == harness.KindOK && o.Pod == pod.name && !o.Sent.After(rules) && o.Done.After(f.request) {
			f.request = o.Done
		}
	}
	return f, true
}

// excess is the pod's soft stop minus its floor (negative: HAProxy closed
// its listeners before the floor); false when either is unknown.
func excess(pod podResult, out []harness.Outcome) (time.Duration, bool) {
	f, ok := floorOf(pod, out)
	if !ok || pod.soft.IsZero() {
		return 0, false
	}
	return pod.soft.Sub(f.at()), true
}

// cellExcess is a cell's excess per drain position (its pods in the order
// they were deleted); ok[i] false where position i has no excess.
func cellExcess(c cellResult) (ex []time.Duration, ok []bool) {
	for _, p := range c.pods {
		e, k := excess(p, c.outcomes)
		ex, ok = append(ex, e), append(ok, k)
	}
	return ex, ok
}

// excessSummary is one strategy's excess over the floor in the cells of
// one kube-proxy state.
type excessSummary struct {
	drains  int // drains with an excess
	missing int // drains without (a node's rules never dropped the pod, or no soft stop)
	median  time.Duration
	max     time.Duration
}

// summarizeExcess gathers the excess of every drain in cells whose frozen
// state is frozen.
func summarizeExcess(cells []cellResult, frozen bool) excessSummary {
	var s excessSummary
	var all []time.Duration
	for _, c := range cells {
		if c.frozen != frozen {
			continue
		}
		ex, ok := cellExcess(c)
		for i := range ex {
			if !ok[i] {
				s.missing++
				continue
			}
			all = append(all, ex[i])
		}
	}
	s.drains = len(all)
	if len(all) > 0 {
		s.median, s.max = median(all), slices.Max(all)
	}
	return s
}

func (s excessSummary) String() string {
	if s.drains == 0 {
		return "n/a"
	}
	out := fmt.Sprintf("%s / %s (%d drains)", signed(s.median), signed(s.max), s.drains)
	if s.missing > 0 {
		out += fmt.Sprintf(", %d without a floor", s.missing)
	}
	return out
}

// signed is d in seconds with its sign.
func signed(d time.Duration) string { return fmt.Sprintf("%+.2f", d.Seconds()) }

// floorTable renders, per cell, each drain position's floor (seconds after
// its delete: the rules part, and the last in-flight request's end when it
// is later) and the soft stop's excess over it, with the cell's median and
// max; then, per strategy, the excess over the live and the frozen cells.
func floorTable(cells []cellResult) string {
	var b strings.Builder
	b.WriteString("| strategy | clients | kube-proxy | floor, 1st drain (s after its delete) | floor, 2nd drain | soft stop − floor, 1st / 2nd (s) | excess median / max (s) |\n")
	b.WriteString("|---|---|---|--:|--:|--:|--:|\n")
	var names []string
	for _, c := range cells {
		if !slices.Contains(names, c.strat.name) {
			names = append(names, c.strat.name)
		}
		var fl [2]string
		var exs []string
		ex, ok := cellExcess(c)
		var have []time.Duration
		for i, p := range c.pods {
			if i < 2 {
				fl[i] = floorCell(p, c.outcomes)
			}
			if ok[i] {
				exs = append(exs, signed(ex[i]))
				have = append(have, ex[i])
			} else {
				exs = append(exs, "n/a")
			}
		}
		summ := "n/a"
		if len(have) > 0 {
			summ = signed(median(have)) + " / " + signed(slices.Max(have))
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s |\n", c.strat.name, c.pat, c.proxy(), cmp.Or(fl[0], "n/a"), cmp.Or(fl[1], "n/a"), strings.Join(exs, " / "), summ)
	}
	b.WriteString("\n| strategy | excess over the floor, live cells: median / max (s) | frozen cells: median / max (s) |\n|---|--:|--:|\n")
	for _, name := range names {
		var cs []cellResult
		for _, c := range cells {
			if c.strat.name == name {
				cs = append(cs, c)
			}
		}
		fmt.Fprintf(&b, "| %s | %v | %v |\n", name, summarizeExcess(cs, false), summarizeExcess(cs, true))
	}
	return b.String()
}

// floorCell is one drain's floor in seconds after its delete: "rules" or
// "rules → request" when a request in flight ended later.
func floorCell(p podResult, out []harness.Outcome) string {
	f, ok := floorOf(p, out)
	if !ok {
		return "n/a"
	}
	s := secs(f.rules.Sub(p.deleted))
	if f.request.After(f.rules) {
		s += " → " + secs(f.request.Sub(p.deleted))
	}
	return s
}

// Excess targets over the floor, met with kube-proxy's metrics as a
// second witness: per kube-proxy state a median and a max. Live, the
// median 0.3 s and the max 1 s. Frozen, the max is kube-proxy's
// minSyncPeriod (the bench's 1 s) + hapsuper's sync allowance + its
// healthz poll interval (no target of its own was set for the catch-up's
// cells, so the all-cells one of before stands). In the frozen cells the median's
// target is the catch-up allowance (the assumed minSyncPeriod: a resumed
// kube-proxy's sync that holds a change it missed can come that long after
// the resume) + 0.3 s: soundness needs the catch-up, and kube-proxy
// publishes nothing per change that could shorten it (docs/routing.md,
// "The catch-up's cost").
const (
	excessLiveTarget    = 300 * time.Millisecond
	excessLiveMaxTarget = time.Second
	catchUpAllowance    = conf.DefaultKubeProxyMinSyncPeriod
	excessFrozenTarget  = catchUpAllowance + 300*time.Millisecond
	excessMaxTarget     = time.Second + conf.DefaultKubeProxySyncAllowance + routing.DefaultHealthzPollInterval
)

// excessTargets judges a hapsuper strategy's excess over the floor: per
// cell, its median within the live or frozen target and its max within
// excessLiveMaxTarget (live) or excessMaxTarget (frozen). They hold for the default withdrawn quiet period and
// with the metrics witness; otherwise the figures are measured only.
func excessTargets(cells []cellResult, name string, wq time.Duration, metrics bool) []target {
	def := hapsuperS().quietOnceWithdrawn()
	judged := metrics && wq <= def
	why := "measured (the targets hold with -kube-proxy-metrics)"
	if wq > def {
		why = fmt.Sprintf("measured (the targets hold for the default %v withdrawn quiet period)", def)
	}
	var out []target
	for _, st := range []struct {
		frozen bool
		want   time.Duration
		most   time.Duration
		label  string
		median string
	}{{false, excessLiveTarget, excessLiveMaxTarget, "live", fmt.Sprintf("%.1f s", excessLiveTarget.Seconds())},
		{true, excessFrozenTarget, excessMaxTarget, "frozen", fmt.Sprintf("the catch-up allowance (%v) + 0.3 s", catchUpAllowance)}} {
		var over []string
		n := 0
		for _, c := range cells {
			if c.frozen != st.frozen {
				continue
			}
			n++
			ex, ok := cellExcess(c)
			var have []time.Duration
			for i := range ex {
				if ok[i] {
					have = append(have, ex[i])
				}
			}
			switch {
			case len(have) < len(ex):
				over = append(over, fmt.Sprintf("%s: %d of %d drains without a floor", c.pat, len(ex)-len(have), len(ex)))
			case median(have) > st.want || slices.Max(have) > st.most:
				over = append(over, fmt.Sprintf("%s: %s / %s s", c.pat, signed(median(have)), signed(slices.Max(have))))
			}
		}
		if n == 0 {
			continue
		}
		v := why
		if judged {
			v = verdict(len(over) == 0, strings.Join(over, "; "))
		}
		out = append(out, target{fmt.Sprintf("%s: soft stop − floor in the %s cells, per cell median ≤ %s and max ≤ %.2f s", name, st.label, st.median, st.most.Seconds()),
			fmt.Sprintf("%d of %d cells within; all drains %v", n-len(over), n, summarizeExcess(cells, st.frozen)), v})
	}
	return out
}

// oracleDrains is, per drain of cells, the drain a stop that soft-stopped
// exactly at the floor would have had (its soft stop → exit as measured).
func oracleDrains(cells []cellResult) []time.Duration {
	var out []time.Duration
	for _, c := range cells {
		for _, p := range c.pods {
			f, ok := floorOf(p, c.outcomes)
			if !ok || p.soft.IsZero() || p.master.IsZero() {
				continue
			}
			out = append(out, f.at().Sub(p.deleted)+p.master.Sub(p.soft))
		}
	}
	return out
}
