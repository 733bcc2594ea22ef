package check

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// fakeHAProxy writes a script that prints out for any arguments and exits
// with code, and returns its path.
func fakeHAProxy(t *testing.T, out string, code int) string {
	t.Helper()
	dir := t.TempDir()
	text := filepath.Join(dir, "vv.txt")
	if err := os.WriteFile(text, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "haproxy")
	script := "#!/bin/sh\ncat '" + text + "'\nexit " + strconv.Itoa(code) + "\n"
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// captured is the `haproxy -vv` output of a Debian build (conf's testdata).
func captured(t *testing.T, branch string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "haproxy", "testdata", "haproxy-vv", branch+".txt"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// versionLine is a `haproxy -v` first line of version v.
func versionLine(v string) string {
	return "HAProxy version " + v + " 2026/01/01 - https://haproxy.org/\n"
}

// The version row names the release and how `run` learns it is ready;
// below a minimum patch level it WARNs once per known regression with
// what breaks and the release that fixes it.
func TestHAProxyVersionRows(t *testing.T) {
	type row struct {
		st          Status
		detail, fix string
	}
	tests := []struct {
		name string
		out  string
		code int
		want []row
	}{
		{"Debian 3.2", captured(t, "3.2"), 0, []row{{OK, "HAProxy 3.2.26-1 (", ""}}},
		{"Debian 3.4", captured(t, "3.4"), 0, []row{{OK, "HAProxy 3.4.7-1 (", ""}}},
		{"Debian 3.0 has -Ws", captured(t, "3.0"), 0, []row{{OK, "HAProxy 3.0.11-1+deb13u4 (", ""}}},
		{"3.0 without USE_SYSTEMD", versionLine("3.0.11"), 0, []row{{OK, "no -Ws, ready when its master CLI shows a worker", ""}}},
		{"3.2 from 3.1 on always -Ws", versionLine("3.2.26"), 0, []row{{OK, "ready when it says READY=1 (-Ws)", ""}}},
		{"3.2.4", versionLine("3.2.4"), 0, []row{
			{Warn, "3.2.4 has an upstream bug of 3.2.0–3.2.4: with several threads, a soft stop", "upgrade HAProxy to 3.2.5 or later"},
			{Warn, "3.2.0–3.2.14: `@!<pid>` to a worker that is still starting", "upgrade HAProxy to 3.2.15 or later"},
		}},
		{"3.2.10", versionLine("3.2.10-1"), 0, []row{
			{Warn, "3.2.9–3.2.10: after a failed reload the master leaves every signal pending", "upgrade HAProxy to 3.2.11 or later, the first 3.2 release with the fix"},
			{Warn, "3.2.0–3.2.14", "3.2.15 or later"},
		}},
		{"3.3.1", versionLine("3.3.1"), 0, []row{{Warn, "3.3.0–3.3.1: after a failed reload", "upgrade HAProxy to 3.3.2 or later"}}},
		{"3.2.15", versionLine("3.2.15"), 0, []row{{OK, "HAProxy 3.2.15 (", ""}}},
		{"not HAProxy", "Usage: something else\n", 0, []row{{Fail, "check that the binary after -- is HAProxy", "give HAProxy's binary first after --"}}},
		{"exits 1", versionLine("3.4.8"), 1, []row{{Fail, "-vv: exit status 1", "check that the binary runs here"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r Report
			haproxyVersionRows(context.Background(), &r, []string{fakeHAProxy(t, tt.out, tt.code), "-f", "x.cfg"})
			if len(r.Rows) != len(tt.want) {
				t.Fatalf("rows %+v, want %d", r.Rows, len(tt.want))
			}
			for i, w := range tt.want {
				got := r.Rows[i]
				if got.Area != AreaConfig || got.Subject != "haproxy version" || got.Status != w.st ||
					!strings.Contains(got.Detail, w.detail) || !strings.Contains(got.Fix, w.fix) || (w.fix == "") != (got.Fix == "") {
					t.Errorf("row %d: %+v\nwant %s with detail containing %q and fix %q", i, got, w.st, w.detail, w.fix)
				}
			}
		})
	}
}

// The row of this machine's HAProxy, and of a command whose binary is not
// here.
func TestHAProxyVersionRows_Real(t *testing.T) {
	const haproxy = "/usr/sbin/haproxy"
	if _, err := os.Stat(haproxy); err != nil {
		t.Fatalf("%s: %v (install Debian's haproxy; .ci/run does)", haproxy, err)
	}
	var r Report
	haproxyVersionRows(context.Background(), &r, []string{haproxy, "-f", "x.cfg"})
	haproxyVersionRows(context.Background(), &r, []string{"haproxy-not-installed-here"})
	if len(r.Rows) != 2 || r.Rows[0].Status != OK || !strings.Contains(r.Rows[0].Detail, "HAProxy 2.6.") ||
		r.Rows[1].Status != Skip || !strings.Contains(r.Rows[1].Detail, `no HAProxy binary "haproxy-not-installed-here"`) {
		t.Errorf("rows %+v: want OK naming HAProxy 2.6, then SKIP", r.Rows)
	}
}
