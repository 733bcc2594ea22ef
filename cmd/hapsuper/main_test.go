package main

import (
	"bytes"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// The command's exit codes and messages, without HAProxy: what fails before
// anything starts.
func TestRunCommands(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "none.sock")
	tests := []struct {
		name       string
		args       []string
		code       int
		stdout     string
		stderrHint string
	}{
		{"version", []string{"version"}, 0, "hapsuper ", ""},
		{"version names the Go release and platform", []string{"version"}, 0, runtime.Version() + ", " + runtime.GOOS + "/" + runtime.GOARCH, ""},
		{"--version", []string{"--version"}, 0, "hapsuper ", ""},
		{"bad duration", []string{"--grace-period", "abc"}, 2, "", "not a duration"},
		{"impossible timings", []string{"--quiet-period", "30s"}, 2, "", "lower --quiet-period or raise --max-wait"},
		{"unknown flag", []string{"run", "--grace", "3s"}, 2, "", "unknown flag --grace: did you mean --grace-period?"},
		{"status without a supervisor", []string{"status", "--socket", missing}, 1, "", "is hapsuper running?"},
		{"status bad interval", []string{"status", "--interval", "1ms"}, 2, "", "--interval must be at least 50ms"},
		{"status stray argument", []string{"status", "now"}, 2, "", "unexpected argument"},
		{"missing haproxy binary", []string{"--", filepath.Join(t.TempDir(), "haproxy"), "-f", "x.cfg"}, 127, "", "not found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := run(tt.args, &out, &errb)
			if code != tt.code {
				t.Errorf("run(%q) = %d, want %d; stderr: %s", tt.args, code, tt.code, errb.String())
			}
			if !strings.Contains(out.String(), tt.stdout) {
				t.Errorf("stdout %q lacks %q", out.String(), tt.stdout)
			}
			if !strings.Contains(errb.String(), tt.stderrHint) {
				t.Errorf("stderr %q lacks %q", errb.String(), tt.stderrHint)
			}
		})
	}
}
