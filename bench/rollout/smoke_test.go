package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/hapsuper/hapsuper/test/harness"
)

// TestMain lets the fan-out child run from the test binary: runFanout
// re-executes the running executable with HAPSUPER_BENCH_CHILD set.
func TestMain(m *testing.M) {
	if childMode() {
		return
	}
	code := m.Run()
	harness.RemoveBinary()
	os.Exit(code)
}

// TestSmoke runs the smoke mode (quiet + hapsuper, new connections, live
// kube-proxy, 100-node fan-out) on a real cluster and checks that it
// produced a results table with requests in every row and the timeline
// picture. The harness skips it without root or the Kubernetes binaries,
// and fails it when CI=true.
func TestSmoke(t *testing.T) {
	dir := t.TempDir()
	o := options{smoke: true, grace: 20 * time.Second, fanout: 100, picture: filepath.Join(dir, "timeline.svg")}
	table := runSmoke(t, o, "", filepath.Join(dir, "RESULTS.md"))
	rows := regexp.MustCompile(`(?m)^\| (quiet|hapsuper) \| new-conns \| live \| (\d+) \|`).FindAllSubmatch(table, -1)
	if len(rows) != 2 {
		t.Fatalf("results table has %d rows for quiet and hapsuper, want 2:\n%s", len(rows), table)
	}
	for _, row := range rows {
		if n, _ := strconv.Atoi(string(row[2])); n == 0 {
			t.Errorf("strategy %s: 0 requests in its row", row[1])
		}
	}
	for _, pic := range []string{o.picture, filepath.Join(dir, "timeline.png")} {
		fi, err := os.Stat(pic)
		if err != nil {
			t.Errorf("picture: %v", err)
		} else if fi.Size() < 1000 {
			t.Errorf("picture %s: only %d bytes", pic, fi.Size())
		}
	}
}

// TestSoakSmoke runs the soak mode for 2 drains of one pattern (one
// rollout) and checks its table: one row, 2 drains, requests, a drain
// distribution and 0 failed.
func TestSoakSmoke(t *testing.T) {
	o := options{smoke: true, grace: 20 * time.Second, soak: 2}
	table := runSmoke(t, o, string(patNewConns), filepath.Join(t.TempDir(), "SOAK.md"))
	rows := regexp.MustCompile(`(?m)^\| hapsuper \| new-conns \| live \| (\d+) \| (\d+) \| (\S+) \| ([\d.]+) / [\d.]+ / [\d.]+ / [\d.]+ / ([\d.]+) \|`).FindAllSubmatch(table, -1)
	if len(rows) != 1 {
		t.Fatalf("soak table has %d hapsuper / new-conns / live rows, want 1:\n%s", len(rows), table)
	}
	row := rows[0]
	if string(row[1]) != "2" {
		t.Errorf("soak row has %s drains, want 2:\n%s", row[1], table)
	}
	if n, _ := strconv.Atoi(string(row[2])); n == 0 {
		t.Errorf("soak row has 0 requests:\n%s", table)
	}
	if string(row[3]) != "0" {
		t.Errorf("soak row: %s requests failed, want 0:\n%s", row[3], table)
	}
	if lo, _ := strconv.ParseFloat(string(row[4]), 64); lo <= 0 {
		t.Errorf("soak row: shortest drain %s s, want above 0:\n%s", row[4], table)
	}
}

// runSmoke runs the benchmark with o and the -patterns flag pats, writing
// its table to results, and returns the table.
func runSmoke(t *testing.T, o options, pats, results string) []byte {
	t.Helper()
	needRootAndHAProxy(t)
	o, err := o.withDefaults(pats, "")
	if err != nil {
		t.Fatal(err)
	}
	o.results = results
	var out bytes.Buffer
	if err := runBench(t, o, &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	t.Logf("run output:\n%s", out.String())
	table, err := os.ReadFile(results)
	if err != nil {
		t.Fatalf("results table: %v", err)
	}
	return table
}

// needRootAndHAProxy skips the test without root or haproxy, or fails it
// when CI=true.
func needRootAndHAProxy(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("the rollout smoke run needs root (network namespaces); CI=true")
		}
		t.Skip("the rollout smoke run needs root (network namespaces)")
	}
	if _, err := exec.LookPath("haproxy"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the rollout smoke run needs haproxy: %v", err)
		}
		t.Skipf("the rollout smoke run needs haproxy: %v", err)
	}
}

// TestCampaignSmoke runs a campaign of 4 drains (2 rollouts, seeded: the
// same faults every run, kube-proxy and the apiserver frozen among them) and
// checks its table: 4 drains, no failed request in a rollout whose drains
// all ended routed-away, no drain routed-away with a late request on a
// fresh connection, and the per-fault table.
func TestCampaignSmoke(t *testing.T) {
	o := options{grace: 20 * time.Second, campaign: 4, seed: 20261207}
	table := runSmoke(t, o, "", filepath.Join(t.TempDir(), "CAMPAIGN.md"))
	row := regexp.MustCompile(`(?m)^\| (\d+) \| (\d+) \| (\d+) \| (\d+) \| (\d+) \| (\d+) \| (\d+) \| (.+) \|$`).FindSubmatch(table)
	if row == nil {
		t.Fatalf("no totals row in the campaign table:\n%s", table)
	}
	if string(row[1]) != "4" || string(row[2]) != "2" {
		t.Errorf("campaign: %s drains in %s rollouts, want 4 in 2:\n%s", row[1], row[2], table)
	}
	if string(row[4]) != "0" || string(row[6]) != "0" {
		t.Errorf("campaign: %s failed requests in rollouts ended routed-away, %s drains routed-away with late requests; want 0 and 0:\n%s", row[4], row[6], table)
	}
	t.Logf("campaign smoke: %s failed requests in all (a drain ending bound may have some), verdicts %s", row[3], row[8])
	if !bytes.Contains(table, []byte("## Verdicts per fault")) || !bytes.Contains(table, []byte("| kube-proxy frozen | 2 |")) {
		t.Errorf("campaign table lacks the verdicts per fault, or the drains of the kube-proxy freezes the seed draws:\n%s", table)
	}
}
