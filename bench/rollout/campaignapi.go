package main

import (
	"fmt"
	"strings"
	"time"
)

// The control plane's part in a campaign's drains: a drain can only end
// routed-away once the API has withdrawn its pod, and after an apiserver
// restart the EndpointSlice controller may take a while to do it. The
// report keeps its headline figures over every drain and also states the
// routed-away share of the drains whose pod the API withdrew, naming the
// others.

// apiPending begins hapsuper's routing detail while an EndpointSlice still
// lists the pod ready (routing/judge: "routed here in the API: <paths>").
const apiPending = "routed here in the API"

// notWithdrawn says whether the drain ended with nothing showing that the
// API had withdrawn its pod: hapsuper's last verdict still found it ready
// in an EndpointSlice, and no node's rules had dropped it before the drain
// ended. A drop would show that the slice had changed and the verdict had
// missed it, so such a drain is not left out. Records without the first
// drop fall back on the last one, which then only clears drains whose every
// node dropped the pod in time.
func (d campaignDrain) notWithdrawn() bool {
	if !strings.Contains(d.pod.detail, apiPending) {
		return false
	}
	first := d.rulesFirstGone
	if first < 0 {
		first = d.rulesGone
	}
	return first < 0 || first >= d.ended
}

// routedAwayParagraph states the routed-away share of all drains and of
// those whose pod the API withdrew, and names the drains left out.
func routedAwayParagraph(ds []campaignDrain) string {
	routed, withdrawn, routedWithdrawn := 0, 0, 0
	var out []string
	for _, d := range ds {
		r := d.pod.reason == "routed-away"
		if r {
			routed++
		}
		if d.notWithdrawn() {
			out = append(out, fmt.Sprintf("rollout %d %s", d.rollout, d.pod.name))
			continue
		}
		withdrawn++
		if r {
			routedWithdrawn++
		}
	}
	s := fmt.Sprintf("\nRouted-away: %d of %d drains (%s); of the %d drains whose pod the API withdrew, %d (%s). ",
		routed, len(ds), percent(routed, len(ds)), withdrawn, routedWithdrawn, percent(routedWithdrawn, withdrawn))
	s += fmt.Sprintf("Left out of the second (%d): the drains that ended while hapsuper's verdict still found the pod ready in its EndpointSlice (%q) and no node's rules had dropped it", len(out), apiPending)
	if len(out) > 8 {
		out = append(out[:8], "…")
	}
	if len(out) > 0 {
		s += ": " + strings.Join(out, ", ")
	}
	return s + ".\n"
}

// percent is n of all as "93.3 %"; "-" when all is 0.
func percent(n, all int) string {
	if all == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f %%", 100*float64(n)/float64(all))
}

// probeRollouts returns, per rollout, its first drain: the probe's wait is
// the rollout's.
func probeRollouts(ds []campaignDrain) []campaignDrain {
	var out []campaignDrain
	seen := map[int]bool{}
	for _, d := range ds {
		if !seen[d.rollout] {
			seen[d.rollout] = true
			out = append(out, d)
		}
	}
	return out
}

// probeSetup is the setup's sentence on the probe: every rollout of these
// records waited for the EndpointSlice controller, some did (campaigns run
// in parts, some before the probe), or none did (nothing to say).
func probeSetup(ds []campaignDrain) string {
	rs := probeRollouts(ds)
	recorded := 0
	for _, d := range rs {
		if d.probe >= 0 {
			recorded++
		}
	}
	if recorded == 0 {
		return ""
	}
	s := fmt.Sprintf("Before each rollout's first delete the run waits, up to %.0f s, until kube-controller-manager's EndpointSlice controller lists a probe pod ready in a probe Service's EndpointSlice (after an apiserver restart the controller comes back on client-go's backoff); without an answer the rollout goes on. ", probeBound.Seconds())
	if recorded < len(rs) {
		s = fmt.Sprintf("In the parts that record it (%d of %d rollouts): ", recorded, len(rs)) + s
	}
	return s
}

// probeParagraph says how long the probes waited; nothing when no record
// holds it.
func probeParagraph(ds []campaignDrain) string {
	recorded, over, timedOut := 0, 0, 0
	var longest campaignDrain
	for _, d := range probeRollouts(ds) {
		if d.probe < 0 {
			continue
		}
		recorded++
		if d.probe > time.Second {
			over++
		}
		if d.probeTimedOut {
			timedOut++
		}
		if longest.rollout == 0 || d.probe > longest.probe {
			longest = d
		}
	}
	if recorded == 0 {
		return ""
	}
	return fmt.Sprintf("\nThe EndpointSlice controller answered the probe within 1 s before %d of %d rollouts; the longest wait was %.1f s (rollout %d), and %d of the %d went on without an answer after %.0f s.\n",
		recorded-over, recorded, longest.probe.Seconds(), longest.rollout, timedOut, recorded, probeBound.Seconds())
}
