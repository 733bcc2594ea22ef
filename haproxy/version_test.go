package haproxy

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestParseHAProxyVersion_Captured reads the `haproxy -vv` output of the
// four builds the suites run against (testdata/haproxy-vv, Debian's
// packages): 2.6 and 3.0 list USE_SYSTEMD, 3.2 and 3.4 no longer do, and
// every one of them supports -Ws.
func TestParseVersion_Captured(t *testing.T) {
	tests := []struct {
		file    string
		version string
		branch  string
		systemd bool
		line    string
	}{
		{"2.6.txt", "2.6.12-1+deb12u4", "2.6", true, "HAProxy version 2.6.12-1+deb12u4 2026/10/17 - https://haproxy.org/"},
		{"3.0.txt", "3.0.11-1+deb13u4", "3.0", true, "HAProxy version 3.0.11-1+deb13u4 2026/10/15 - https://haproxy.org/"},
		{"3.2.txt", "3.2.26-1", "3.2", false, "HAProxy version 3.2.26-1 2026/10/14 - https://haproxy.org/"},
		{"3.4.txt", "3.4.7-1", "3.4", false, "HAProxy version 3.4.7-1 2026/10/14 - https://haproxy.org/"},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join("testdata", "haproxy-vv", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			v, err := ParseVersion(string(b))
			if err != nil {
				t.Fatal(err)
			}
			if v.String() != tt.version || v.Branch() != tt.branch || v.Line != tt.line || v.Dev {
				t.Errorf("parsed %q as %s (branch %s, dev %v, line %q), want %s (branch %s)", tt.file, v, v.Branch(), v.Dev, v.Line, tt.version, tt.branch)
			}
			if v.Systemd != tt.systemd {
				t.Errorf("%s: Systemd = %v, want %v", tt.file, v.Systemd, tt.systemd)
			}
			if !v.SupportsNotify() {
				t.Errorf("%s: SupportsNotify = false, want true", tt.file)
			}
			if rs := v.Regressions(); len(rs) != 0 {
				t.Errorf("%s: regressions %v, want none", tt.file, rs)
			}
			// `-v` prints the first line and the status lines only.
			first, _, _ := strings.Cut(string(b), "\n")
			short, err := ParseVersion(first + "\n")
			if err != nil || short.String() != tt.version || short.Systemd {
				t.Errorf("-v line of %s: %+v, %v; want %s without the build options", tt.file, short, err, tt.version)
			}
		})
	}
}

func TestParseVersion_Lines(t *testing.T) {
	tests := []struct {
		out     string
		version string
		dev     bool
		notify  bool
	}{
		// A 3.0 build without USE_SYSTEMD cannot -Ws; 3.1 and later always can.
		{"HAProxy version 3.0.11-1+deb13u4 2026/10/15 - https://haproxy.org/\n", "3.0.11-1+deb13u4", false, false},
		{"HAProxy version 3.1.0 2024/11/26 - https://haproxy.org/\n", "3.1.0", false, true},
		{"HAProxy version 3.4.8 2026/11/02 - https://haproxy.org/\n", "3.4.8", false, true},
		{"HAProxy version 3.5-dev5 2026/11/20 - https://haproxy.org/\n", "3.5-dev5", true, true},
		{"HAProxy version 3.2.26-a1b2c3d 2026/10/14 - https://haproxy.org/\n", "3.2.26-a1b2c3d", false, true},
		{"HA-Proxy version 2.0.33-1 2023/08/19 - https://haproxy.org/\n", "2.0.33-1", false, false},
		{"HAProxy version 2.8.5 2023/12/07 - https://haproxy.org/\nOPTIONS = USE_SYSTEMD=1\n", "2.8.5", false, true},
		{"HAProxy version 2.6.12-1+deb12u4 2026/10/17\r\n", "2.6.12-1+deb12u4", false, false},
	}
	for _, tt := range tests {
		v, err := ParseVersion(tt.out)
		if err != nil {
			t.Errorf("%q: %v", tt.out, err)
			continue
		}
		if v.String() != tt.version || v.Dev != tt.dev || v.SupportsNotify() != tt.notify {
			t.Errorf("%q: %s dev %v notify %v, want %s dev %v notify %v", tt.out, v, v.Dev, v.SupportsNotify(), tt.version, tt.dev, tt.notify)
		}
	}
	for _, bad := range []string{"", "\n", "haproxy: command not found\n", "HAProxy version x.y\n", "Usage : haproxy [-f <cfgfile>]\n"} {
		if v, err := ParseVersion(bad); err == nil || !strings.Contains(err.Error(), "binary after -- is HAProxy") {
			t.Errorf("%q: parsed as %+v, %v; want an error naming the binary", bad, v, err)
		}
	}
}

// TestHAProxyVersion_Regressions: every release of a known range is
// judged affected, the release that fixes it is not, and a later branch
// does not inherit a branch's bug.
func TestVersion_Regressions(t *testing.T) {
	threads, signals, signals33, fdLoop := KnownRegressions[0], KnownRegressions[1], KnownRegressions[2], KnownRegressions[3]
	tests := []struct {
		version string
		want    []Regression
	}{
		{"3.2.0", []Regression{threads, fdLoop}},
		{"3.2.4-1", []Regression{threads, fdLoop}},
		{"3.2.5", []Regression{fdLoop}},
		{"3.2.8", []Regression{fdLoop}},
		{"3.2.9", []Regression{signals, fdLoop}},
		{"3.2.10", []Regression{signals, fdLoop}},
		{"3.2.11", []Regression{fdLoop}},
		{"3.2.14", []Regression{fdLoop}},
		{"3.2.15", nil},
		{"3.2.26-1", nil},
		{"3.3.0", []Regression{signals33}},
		{"3.3.1", []Regression{signals33}},
		{"3.3.2", nil},
		{"3.4.0", nil},
		{"3.0.11-1+deb13u4", nil},
		{"2.6.12-1+deb12u4", nil},
		{"3.3-dev14", nil},
	}
	for _, tt := range tests {
		v, err := ParseVersion("HAProxy version " + tt.version + " 2026/01/01 - https://haproxy.org/\n")
		if err != nil {
			t.Fatal(err)
		}
		if got := v.Regressions(); !slices.Equal(got, tt.want) {
			t.Errorf("%s: regressions %v, want %v", tt.version, got, tt.want)
		}
	}
	for _, r := range KnownRegressions {
		if r.Fixed <= r.First || r.Breaks == "" {
			t.Errorf("regression %+v: want First < Fixed and what it breaks", r)
		}
	}
	if got := signals.Affected() + " fixed in " + signals.FixedIn(); got != "3.2.9–3.2.10 fixed in 3.2.11" {
		t.Errorf("the failed-reload regression reads %q", got)
	}
}
