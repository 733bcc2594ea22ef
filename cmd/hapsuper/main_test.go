package main

import (
	"bytes"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/hapsuper/hapsuper/conf"
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
		{"status without a supervisor", []string{"status", "--socket", missing}, 1, "", "is hapsuper running? pass --status-socket"},
		{"status --watch without a supervisor", []string{"status", "--watch", "--status-socket", missing}, 1, "", "pass --status-socket"},
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

// The start is one short INFO line with what decides a drain's length;
// every setting is at DEBUG.
func TestStartLine(t *testing.T) {
	s, err := conf.Parse([]string{"--grace-period", "30s"}, func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	logStart(slog.New(slog.NewTextHandler(&b, &slog.HandlerOptions{Level: slog.LevelDebug})), s)
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("logStart wrote %d lines, want 2:\n%s", len(lines), b.String())
	}
	info, debug := lines[0], lines[1]
	for _, want := range []string{"level=INFO", "hapsuper starting", "grace-period=30s", "max-wait=18.666s", "quiet-period=2s", "routing=auto", "haproxy="} {
		if !strings.Contains(info, want) {
			t.Errorf("the start line lacks %q: %s", want, info)
		}
	}
	if len(info) > 300 {
		t.Errorf("the start line is %d characters, want at most 300: %s", len(info), info)
	}
	if !strings.Contains(debug, "level=DEBUG") || !strings.Contains(debug, "settings.kube-proxy-sync-allowance=250ms") || !strings.Contains(debug, "settings.status-socket=") {
		t.Errorf("the DEBUG line lacks every setting: %s", debug)
	}
}

// A build from a checkout reports "dev", as docs/releases.md says, not the
// "(devel)" Go records for it; a module version go install recorded is
// reported as it is.
func TestModuleVersion(t *testing.T) {
	for _, tt := range []struct {
		main string
		ok   bool
		want string
	}{
		{"(devel)", true, "dev"},
		{"", true, "dev"},
		{"v1.2.3", true, "v1.2.3"},
		{"v1.2.3", false, "dev"},
	} {
		bi := &debug.BuildInfo{Main: debug.Module{Version: tt.main}}
		if got := moduleVersion(bi, tt.ok); got != tt.want {
			t.Errorf("moduleVersion(%q, %v) = %q, want %q", tt.main, tt.ok, got, tt.want)
		}
	}
}

// A frontend port another process listens on stops run before HAProxy
// starts, with exit 2 and the fix: HAProxy's SO_REUSEPORT would otherwise
// share the port's connections with that process without a word.
func TestRunRefusesATakenFrontendPort(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "haproxy.cfg")
	if err := os.WriteFile(cfg, []byte("defaults\n    mode tcp\nfrontend web\n    bind "+taken.Addr().String()+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bin, err := exec.LookPath("true") // never run: the check comes first
	if err != nil {
		t.Skip("no true on the PATH")
	}
	code, _, errs := runArgs("run", "--routing", "off", "--master-socket", filepath.Join(dir, "m.sock"),
		"--status-socket", filepath.Join(dir, "s.sock"), "--override-file", filepath.Join(dir, "o.cfg"), "--", bin, "-f", cfg)
	if code != 2 || !strings.Contains(errs, "frontend web binds "+taken.Addr().String()) || !strings.Contains(errs, "stop that process or change the bind") {
		t.Errorf("run with frontend web's port taken: exit %d, want 2 and the fix; stderr:\n%s", code, errs)
	}
}
