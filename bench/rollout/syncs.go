package main

import (
	"bufio"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/hapsuper/hapsuper/conf"
)

// kube-proxy's own account of its rule syncs, read from its log (--v=2):
// how long each took. hapsuper's healthz rule takes a sync completed the
// sync allowance D (--kube-proxy-sync-allowance) after its receipt of a
// change to hold it: one that took longer, or started after kube-proxy
// got the change late, may complete that late without it. A run whose
// syncs took longer than D tests the rule outside what it assumes; the
// campaign's report says how often they did.

// syncCompleteRe matches a sync's completion and its elapsed time.
var syncCompleteRe = regexp.MustCompile(`"SyncProxyRules complete".*elapsed="([^"]+)"`)

// syncDurations reads every rule sync's elapsed time from kube-proxy logs.
func syncDurations(logs []string) ([]time.Duration, error) {
	var out []time.Duration
	for _, path := range logs {
		f, err := os.Open(path)
		if err != nil {
			return out, fmt.Errorf("read kube-proxy's syncs: %w", err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			if m := syncCompleteRe.FindStringSubmatch(sc.Text()); m != nil {
				if d, err := time.ParseDuration(m[1]); err == nil {
					out = append(out, d)
				}
			}
		}
		err = sc.Err()
		f.Close()
		if err != nil {
			return out, fmt.Errorf("read kube-proxy's syncs from %s: %w", path, err)
		}
	}
	return out, nil
}

// syncParagraph says how long kube-proxy's syncs took in a run, against
// the default sync allowance.
func syncParagraph(ds []time.Duration) string {
	if len(ds) == 0 {
		return "kube-proxy's rule syncs: none read from its logs.\n"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	at := func(q float64) time.Duration { return s[min(len(s)-1, int(q*float64(len(s))))] }
	d := conf.DefaultKubeProxySyncAllowance
	over := len(s) - func() int { i, _ := slices.BinarySearch(s, d+1); return i }()
	var b strings.Builder
	fmt.Fprintf(&b, "kube-proxy's rule syncs in this run, from its logs (both nodes, both families): %d, median %v, p90 %v, p99 %v, max %v; %d (%.1f %%) took longer than the sync allowance D (%v, hapsuper's default), ",
		len(s), at(0.5).Round(time.Millisecond), at(0.9).Round(time.Millisecond), at(0.99).Round(time.Millisecond), s[len(s)-1].Round(time.Millisecond),
		over, 100*float64(over)/float64(len(s)), d)
	b.WriteString("which assumes kube-proxy's lag behind hapsuper plus one sync within it: a sync that started before kube-proxy had the change and completed D after hapsuper's receipt is taken to hold it. Where syncs take longer, a withdrawn verdict may come before the rules drop; `--kube-proxy-sync-allowance` is to be set to kube-proxy's p99 sync duration or more.\n")
	return b.String()
}

// syncsSeen is syncParagraph for the run's kube-proxies, or why their
// syncs could not be read.
func (r *runner) syncsSeen() string {
	var logs []string
	for _, n := range r.env.H.Nodes() {
		logs = append(logs, n.KubeProxy.Log())
	}
	ds, err := syncDurations(logs)
	if err != nil {
		return fmt.Sprintf("kube-proxy's rule syncs: %v.\n", err)
	}
	return syncParagraph(ds)
}
