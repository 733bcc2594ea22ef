package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"
)

// A campaign's drains are also kept as JSON lines (<results>.jsonl), one
// record per drain, so that campaigns run in parts (another seed, another
// build, another kube-proxy mode) are reported together:
// -campaign-report a.jsonl,b.jsonl renders one CAMPAIGN.md from them.

// drainRecord is one campaign drain as written.
type drainRecord struct {
	Part    string        `json:"part"` // the flags of the run that made it
	Rollout int           `json:"rollout"`
	Seed    uint64        `json:"seed"`
	Pattern string        `json:"pattern"`
	Faults  []faultRecord `json:"faults"`
	Pod     string        `json:"pod"`
	Reason  string        `json:"reason"`
	Detail  string        `json:"detail"`
	Late    int           `json:"late"`
	Failed  int           `json:"failed"`
	Audited int           `json:"audited"`
	// RulesGone and Ended are from the delete; RulesGone -1: the nodes'
	// rules did not drop the pod within the grace period. Absent in
	// records written before they were kept: -1 and 0.
	RulesGone *time.Duration `json:"rulesGone,omitempty"`
	// RulesSeen: the latest start of a listing that still found the pod
	// (campaignDrain.rulesSeen); absent in older records: -1.
	RulesSeen *time.Duration `json:"rulesSeen,omitempty"`
	// RulesFirstGone: when the first node's rules dropped the pod
	// (campaignDrain.rulesFirstGone); absent in older records: -1.
	RulesFirstGone *time.Duration `json:"rulesFirstGone,omitempty"`
	Ended          time.Duration  `json:"ended"`
	// SliceProbe: the rollout's wait for the EndpointSlice controller
	// before its first delete, and whether it went on without an answer;
	// absent in records written before the probe: -1.
	SliceProbe         *time.Duration `json:"sliceProbe,omitempty"`
	SliceProbeTimedOut bool           `json:"sliceProbeTimedOut,omitempty"`
}

type faultRecord struct {
	Kind string        `json:"kind"`
	Node int           `json:"node"`
	At   time.Duration `json:"at"`
	For  time.Duration `json:"for"`
}

// writeDrains writes ds as JSON lines to path.
func writeDrains(path, part string, ds []campaignDrain) error {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	for _, d := range ds {
		r := drainRecord{Part: part, Rollout: d.rollout, Seed: d.seed, Pattern: string(d.pat), Pod: d.pod.name,
			Reason: d.pod.reason, Detail: d.pod.detail, Late: d.pod.late, Failed: d.failed, Audited: d.audited, RulesGone: &d.rulesGone, RulesSeen: &d.rulesSeen, RulesFirstGone: &d.rulesFirstGone, Ended: d.ended,
			SliceProbe: &d.probe, SliceProbeTimedOut: d.probeTimedOut}
		for _, f := range d.faults {
			r.Faults = append(r.Faults, faultRecord{Kind: string(f.kind), Node: f.node, At: f.at, For: f.for_})
		}
		if err := enc.Encode(r); err != nil {
			return err
		}
	}
	return writeFile(path, b.String())
}

// readDrains reads the drains of every file; the rollouts of each file
// after the first are numbered on from the last one before them.
func readDrains(paths []string) ([]campaignDrain, []string, error) {
	var out []campaignDrain
	var parts []string
	offset := 0
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return nil, nil, err
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		last, part := 0, ""
		for line := 1; sc.Scan(); line++ {
			var r drainRecord
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				f.Close()
				return nil, nil, fmt.Errorf("%s:%d: %w", p, line, err)
			}
			d := campaignDrain{rollout: offset + r.Rollout, seed: r.Seed, pat: pattern(r.Pattern), failed: r.Failed, audited: r.Audited,
				pod: podResult{name: r.Pod, reason: r.Reason, detail: r.Detail, late: r.Late}, rulesGone: -1, rulesSeen: -1, rulesFirstGone: -1, ended: r.Ended, probe: -1, probeTimedOut: r.SliceProbeTimedOut}
			if r.RulesGone != nil {
				d.rulesGone = *r.RulesGone
			}
			if r.RulesSeen != nil {
				d.rulesSeen = *r.RulesSeen
			}
			if r.RulesFirstGone != nil {
				d.rulesFirstGone = *r.RulesFirstGone
			}
			if r.SliceProbe != nil {
				d.probe = *r.SliceProbe
			}
			for _, fr := range r.Faults {
				d.faults = append(d.faults, fault{kind: faultKind(fr.Kind), node: fr.Node, at: fr.At, for_: fr.For})
			}
			out = append(out, d)
			last, part = max(last, r.Rollout), r.Part
		}
		err = sc.Err()
		f.Close()
		if err != nil {
			return nil, nil, fmt.Errorf("read %s: %w", p, err)
		}
		offset += last
		parts = append(parts, fmt.Sprintf("`%s` (%s)", part, p))
	}
	return out, parts, nil
}
