package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestBadConfig_ExitsWithClearError: bad flags and configs end hapsuper
// quickly with a non-zero code and an error naming the culprit, and leave
// no HAProxy process. Flag and setting errors exit 2 before HAProxy starts;
// an HAProxy binary that is missing or not executable exits 127 or 126, as
// a shell would.
func TestBadConfig_ExitsWithClearError(t *testing.T) {
	eachHAProxy(t, func(t *testing.T, h haproxyVersion) {
		for _, tc := range []struct {
			name     string
			flags    []string
			broken   bool   // HAProxy config with a syntax error
			binary   string // "missing", "noexec" or "" for haproxy
			wantCode int    // -1: any non-zero
			wantText string // stderr must mention it
		}{
			{name: "GracePeriodNotADuration", flags: []string{"--grace-period=abc"}, wantCode: 2, wantText: "grace-period"},
			{name: "QuietNotBelowMaxWait", flags: []string{"--grace-period", "12s", "--quiet-period", "5s", "--max-wait", "4s"}, wantCode: 2, wantText: "quiet"},
			{name: "UnknownIgnoredFrontend", flags: []string{"--ignore-frontends", "probe,nosuchfrontend"}, wantCode: 2, wantText: "nosuchfrontend"},
			{name: "HAProxyConfigSyntaxError", broken: true, wantCode: -1, wantText: "haproxy.cfg"},
			{name: "HAProxyBinaryMissing", binary: "missing", wantCode: 127, wantText: "no-such-haproxy"},
			{name: "HAProxyBinaryNotExecutable", binary: "noexec", wantCode: 126, wantText: "haproxy-noexec"},
			{name: "StopSignalTheRuntimeRaises", flags: []string{"--stop-signals", "SIGTERM,SIGURG"}, wantCode: 2, wantText: "SIGURG is raised by the Go runtime"},
			// {dir} is the test's directory; open/ in it is mode 0777.
			{name: "StatusSocketInOpenDirectory", flags: []string{"--status-socket", "{dir}/open/status.sock"}, wantCode: 2, wantText: "is writable by other users (mode 0777, no sticky bit)"},
			{name: "KubeconfigUnreadable", flags: []string{"--kubeconfig", "{dir}/no-such-kubeconfig"}, wantCode: 2, wantText: "fix the path or drop --kubeconfig"},
			{name: "OverrideFileIsTheConfig", flags: []string{"--override-file", "{dir}/haproxy.cfg"}, wantCode: 2, wantText: "was not written by hapsuper"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				dir := t.TempDir()
				cfg := newConfig(t)
				cfg.Broken = tc.broken
				bin := h.command(t, dir)
				switch tc.binary {
				case "missing":
					bin = filepath.Join(dir, "no-such-haproxy")
				case "noexec":
					bin = filepath.Join(dir, "haproxy-noexec")
					if err := os.WriteFile(bin, []byte("#!/bin/sh\nexit 0\n"), 0o644); err != nil {
						t.Fatal(err)
					}
				}
				if err := os.Mkdir(filepath.Join(dir, "open"), 0o777); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(filepath.Join(dir, "open"), 0o777); err != nil { // past the umask
					t.Fatal(err)
				}
				// The test's flags after supervisorArgs' own paths: the last one wins.
				args := supervisorArgs(dir, nil)
				args = args[:len(args)-1] // its "--"
				for _, f := range tc.flags {
					args = append(args, strings.ReplaceAll(f, "{dir}", dir))
				}
				args = append(args, "--", bin, "-f", cfg.write(t, dir))
				s := startCommand(t, dir, procOptions{}, args)
				code, exitAt := s.waitExit(10 * time.Second)
				out := s.String()
				t.Logf("exit %d after %s; output:\n%s", code, exitAt.Sub(s.started), out)

				switch {
				case tc.wantCode == -1 && code == 0:
					t.Errorf("exit code 0, want non-zero")
				case tc.wantCode != -1 && code != tc.wantCode:
					t.Errorf("exit code %d, want %d", code, tc.wantCode)
				}
				if !strings.Contains(out, tc.wantText) {
					t.Errorf("the error does not mention %q", tc.wantText)
				}
				if tc.wantCode == 2 {
					if _, ok := s.Find("haproxy ready", nil); ok {
						t.Error("HAProxy was started despite a settings error")
					}
				}
				checkNoHAProxyLeft(t, dir)
			})
		}
	})
}
