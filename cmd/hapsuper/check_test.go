package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// `hapsuper check` exits 0 when every row is OK, 1 with warnings, 3 with
// failures and 2 for a command line it cannot read, as every command does;
// --json prints the rows, the status and the exit code. Routing off: no
// cluster is asked.
func TestCheckCommand(t *testing.T) {
	dir := t.TempDir()
	write := func(name, cfg string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	const defaults = "defaults\n    mode http\n    timeout client 10s\n    timeout client-fin 1s\n"
	graceful := write("graceful.cfg", defaults+"    option idle-close-on-response\nfrontend web\n    bind :8080\n")
	abrupt := write("abrupt.cfg", defaults+"frontend web\n    bind :8080\n")
	tests := []struct {
		name    string
		args    []string
		code    int
		status  string // JSON status; empty: not JSON
		stdout  string
		stderr  string
		rowWant string // a row's detail or fix, in JSON
	}{
		{"all OK", []string{"check", "--routing", "off", "--json", "--", "haproxy-absent", "-f", graceful}, 0, "OK", "", "", "soft stop is graceful"},
		{"warning", []string{"check", "--json", "--routing=off", "--", "haproxy-absent", "-f", abrupt}, 1, "WARN", "", "", "add `option idle-close-on-response` to defaults or frontend web"},
		{"no configuration", []string{"check", "--routing", "off", "--json", "--", "haproxy-absent", "-f", filepath.Join(dir, "none.cfg")}, 3, "FAIL", "", "", "it does not exist"},
		{"settings refused", []string{"check", "--json", "--grace-period", "1s"}, 3, "FAIL", "", "", "must be less than --grace-period 1s"},
		{"text", []string{"check", "--routing", "off", "--", "haproxy-absent", "-f", abrupt}, 1, "", "WARN  config      frontend web", "", ""},
		{"json false", []string{"check", "--json=false", "--routing", "off", "--", "haproxy-absent", "-f", graceful}, 0, "", "OK: ", "", ""},
		{"unknown flag", []string{"check", "--jsn"}, 2, "", "", "unknown flag --jsn: did you mean --json?", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errs := runArgs(tt.args...)
			if code != tt.code {
				t.Errorf("hapsuper %s: exit %d, want %d; stdout:\n%s\nstderr: %s", strings.Join(tt.args, " "), code, tt.code, out, errs)
			}
			if !strings.Contains(out, tt.stdout) || !strings.Contains(errs, tt.stderr) {
				t.Errorf("stdout %q, stderr %q: want %q and %q in them", out, errs, tt.stdout, tt.stderr)
			}
			if tt.status == "" {
				return
			}
			var got struct {
				Status string `json:"status"`
				Exit   int    `json:"exit"`
				Rows   []struct {
					Area, Subject, Status, Detail, Fix string
				} `json:"rows"`
			}
			if err := json.Unmarshal([]byte(out), &got); err != nil {
				t.Fatalf("stdout is not JSON: %v\n%s", err, out)
			}
			if got.Status != tt.status || got.Exit != tt.code || len(got.Rows) == 0 {
				t.Errorf("JSON status %q exit %d with %d rows, want %q %d and rows", got.Status, got.Exit, len(got.Rows), tt.status, tt.code)
			}
			found := false
			for _, r := range got.Rows {
				found = found || strings.Contains(r.Detail+" "+r.Fix, tt.rowWant)
				if r.Area == "" || r.Subject == "" || r.Status == "" || r.Detail == "" {
					t.Errorf("row with an empty field: %+v", r)
				}
			}
			if !found {
				t.Errorf("no row says %q: %+v", tt.rowWant, got.Rows)
			}
		})
	}
}
