package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// docs/usage.md's exit-code table is what the commands do: each case exits
// with its code, and the table's row of that code says something (not –)
// in the column of that command. 2 is a command line hapsuper cannot read
// for every command; check's failures are 3, not 2.
func TestExitCodesAsDocumented(t *testing.T) {
	table := exitCodeTable(t)
	t.Setenv("PATH", t.TempDir()) // no haproxy
	missing := filepath.Join(t.TempDir(), "none")
	for _, tt := range []struct {
		column int // 1: run and demo, 2: check, 3: status, 4: help and version, 5: sidecar, 6: gate
		code   string
		args   []string
	}{
		{1, "2", []string{"run", "--grace", "1s"}},
		{1, "2", []string{"demo", "--grace", "1s"}},
		{1, "127", []string{"demo"}},
		{1, "127", []string{"--", missing, "-f", "x.cfg"}},
		{2, "2", []string{"check", "--jsn"}},
		{2, "3", []string{"check", "--routing", "off", "--", "haproxy", "-f", missing}},
		{3, "2", []string{"status", "now"}},
		{3, "1", []string{"status", "--status-socket", missing}},
		{4, "2", []string{"help", "run", "status"}},
		{4, "2", []string{"version", "--short"}},
		{4, "0", []string{"version"}},
		{5, "2", []string{"sidecar", "--gate-sock", "x"}},
		{5, "2", []string{"sidecar", "--companion", "x"}},
		{5, "2", []string{"sidecar", "--", "haproxy", "-f", "x.cfg"}},
		{6, "2", []string{"gate", "now"}},
		{6, "1", []string{"gate", "--gate-socket", missing}},
	} {
		code, _, errs := runArgs(tt.args...)
		if got := strconv.Itoa(code); got != tt.code {
			t.Errorf("hapsuper %s: exit %d, want %s; stderr %s", strings.Join(tt.args, " "), code, tt.code, errs)
		}
		row, ok := table[tt.code]
		if !ok || len(row) <= tt.column || row[tt.column] == "–" || row[tt.column] == "" {
			t.Errorf("docs/usage.md's exit codes say nothing of %s for hapsuper %s: %q", tt.code, tt.args[0], row)
		}
	}
}

// exitCodeTable reads the table under ### Exit codes in docs/usage.md: its
// cells by the code in the first column.
func exitCodeTable(t *testing.T) map[string][]string {
	t.Helper()
	b, err := os.ReadFile("../../docs/usage.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(b), "### Exit codes\n")
	if !ok {
		t.Fatal("docs/usage.md has no ### Exit codes")
	}
	rows := map[string][]string{}
	for _, l := range strings.Split(after, "\n") {
		if strings.HasPrefix(l, "#") {
			break
		}
		if !strings.HasPrefix(l, "| ") {
			continue
		}
		cells := strings.Split(strings.Trim(l, "|"), " | ")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		for _, code := range strings.Split(cells[0], ", ") {
			rows[code] = cells
		}
	}
	return rows
}
