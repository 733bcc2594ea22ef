package supervisor

import (
	"bytes"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hapsuper/hapsuper/conf"
)

// writeCgroup makes a cgroup mount under a new directory with files
// (relative path → content) and returns it.
func writeCgroup(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, content := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// The limit as the images' run scripts read it: cgroup v2's memory.max
// when cgroup.controllers says v2, else v1's limit_in_bytes; "max", v1's
// near-2^63 and no file at all mean no limit.
func TestMemoryLimit(t *testing.T) {
	cases := []struct {
		name    string
		files   map[string]string
		want    int64
		wantErr string
	}{
		{"v2 limit", map[string]string{"cgroup.controllers": "cpu memory\n", "memory.max": "2147483648\n"}, 2 << 30, ""},
		{"v2 max", map[string]string{"cgroup.controllers": "cpu memory\n", "memory.max": "max\n"}, 0, ""},
		{"v2 without the memory controller", map[string]string{"cgroup.controllers": "cpu\n"}, 0, ""},
		{"v1 limit", map[string]string{"memory/memory.limit_in_bytes": "536870912\n"}, 512 << 20, ""},
		{"v1 unlimited", map[string]string{"memory/memory.limit_in_bytes": "9223372036854771712\n"}, 0, ""},
		{"v1 file ignored on v2", map[string]string{"cgroup.controllers": "memory\n", "memory.max": "max", "memory/memory.limit_in_bytes": "536870912"}, 0, ""},
		{"none", nil, 0, ""},
		{"garbage", map[string]string{"cgroup.controllers": "memory\n", "memory.max": "lots\n"}, 0, `"lots" is not a byte count`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := memoryLimit(writeCgroup(t, c.files))
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("memoryLimit: %v, want an error with %q", err, c.wantErr)
				}
				return
			}
			if err != nil || got != c.want {
				t.Errorf("memoryLimit = %d, %v; want %d", got, err, c.want)
			}
		})
	}
}

// --haproxy-memory-share of a 2 GiB limit is HAProxy's -m (66 %: 1351 MiB);
// off, or no limit, gives none.
func TestHAProxyMemory(t *testing.T) {
	limited := writeCgroup(t, map[string]string{"cgroup.controllers": "memory\n", "memory.max": "2147483648\n"})
	unlimited := writeCgroup(t, map[string]string{"cgroup.controllers": "memory\n", "memory.max": "max\n"})
	for _, c := range []struct {
		name  string
		share int
		root  string
		want  int64
	}{
		{"66 % of 2 GiB", 66, limited, 1351},
		{"off", 0, limited, 0},
		{"no limit", 66, unlimited, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			var logs bytes.Buffer
			sv := &Supervisor{settings: conf.Settings{HAProxyMemoryShare: c.share}, log: slog.New(slog.NewTextHandler(&logs, nil))}
			if got := sv.haproxyMemory(c.root); got != c.want {
				t.Errorf("haproxyMemory = %d, want %d (log: %s)", got, c.want, logs.String())
			}
		})
	}
}

// --companion-memory-share of a 2 GiB limit is the companion's GOMEMLIMIT
// (33 %: 675MiB), unless its environment sets one (a chart's extraEnvs);
// off or no limit adds nothing.
func TestCompanionEnv(t *testing.T) {
	limited := writeCgroup(t, map[string]string{"cgroup.controllers": "memory\n", "memory.max": "2147483648\n"})
	unlimited := writeCgroup(t, map[string]string{"cgroup.controllers": "memory\n", "memory.max": "max\n"})
	base := []string{"PATH=/usr/bin", "POD_NAME=p"}
	for _, c := range []struct {
		name  string
		share int
		root  string
		env   []string
		want  []string
	}{
		{"33 % of 2 GiB", 33, limited, base, append(slices.Clone(base), "GOMEMLIMIT=675MiB")},
		{"the environment's own wins", 33, limited, []string{"GOMEMLIMIT=1GiB"}, []string{"GOMEMLIMIT=1GiB"}},
		{"off", 0, limited, base, base},
		{"no limit", 33, unlimited, base, base},
	} {
		t.Run(c.name, func(t *testing.T) {
			sv := &Supervisor{settings: conf.Settings{CompanionMemoryShare: c.share}, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
			in := slices.Clone(c.env)
			if got := sv.companionEnv(c.root, in); !slices.Equal(got, c.want) {
				t.Errorf("companionEnv = %q, want %q", got, c.want)
			}
			if !slices.Equal(in, c.env) {
				t.Errorf("the caller's env changed to %q", in)
			}
		})
	}
}

// The shares are checked together: HAProxy's and the companion's may not
// add up to more than the whole limit; the error names both flags and
// their variables. Without a companion its share is moot.
func TestCheckMemoryShares(t *testing.T) {
	for _, c := range []struct {
		name                string
		companion           string
		haproxy, companions int
		ok                  bool
	}{
		{"gopherd's 66 and 33", "/ctl", 66, 33, true},
		{"exactly the whole", "/ctl", 50, 50, true},
		{"more than the whole", "/ctl", 80, 40, false},
		{"one share off", "/ctl", 100, 0, true},
		{"no companion", "", 80, 40, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := checkMemoryShares(conf.Settings{Companion: c.companion, HAProxyMemoryShare: c.haproxy, CompanionMemoryShare: c.companions})
			if c.ok {
				if err != nil {
					t.Errorf("checkMemoryShares: %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatal("checkMemoryShares accepted shares above 100 %")
			}
			for _, want := range []string{"--haproxy-memory-share", "--companion-memory-share", "HAPSUPER_HAPROXY_MEMORY_SHARE", "120%"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not name %q", err, want)
				}
			}
		})
	}
}

// hapsuper's own soft limit: the part of the container's limit HAProxy's
// and the companion's shares leave, at least minOwnMemory; nothing set
// without a limit (GOGC alone), and GOMEMLIMIT in the environment wins.
// Each case says it in the log.
func TestOwnMemoryLimit(t *testing.T) {
	v2 := func(max string) map[string]string {
		return map[string]string{"cgroup.controllers": "cpu memory\n", "memory.max": max + "\n"}
	}
	cases := []struct {
		name      string
		files     map[string]string
		settings  conf.Settings
		env       string
		want      int64
		wantInLog string
	}{
		{"no shares: the whole limit", v2("1073741824"), conf.Settings{}, "", 1 << 30, "soft_limit_bytes=1073741824"},
		{"HAProxy's share left out", v2("1073741824"), conf.Settings{HAProxyMemoryShare: 66}, "", 1073741824 * 34 / 100, "soft_limit_bytes=365072220"},
		{"the companion's too", v2("1073741824"), conf.Settings{HAProxyMemoryShare: 50, Companion: "/ic", CompanionMemoryShare: 25}, "", 1 << 28, "soft_limit_bytes=268435456"},
		{"a companion's share without a companion", v2("1073741824"), conf.Settings{CompanionMemoryShare: 25}, "", 1 << 30, "soft_limit_bytes=1073741824"},
		{"never below the floor", v2("1073741824"), conf.Settings{HAProxyMemoryShare: 99}, "", minOwnMemory, "soft_limit_bytes=67108864"},
		{"nor above the limit", v2("33554432"), conf.Settings{HAProxyMemoryShare: 50}, "", 32 << 20, "soft_limit_bytes=33554432"},
		{"no limit: GOGC alone", v2("max"), conf.Settings{}, "", 0, "no cgroup memory limit"},
		{"GOMEMLIMIT wins", v2("1073741824"), conf.Settings{}, "200MiB", 0, "GOMEMLIMIT=200MiB"},
		{"unreadable", v2("lots"), conf.Settings{}, "", 0, "cannot read the memory limit"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var logs bytes.Buffer
			sv := &Supervisor{settings: c.settings, log: slog.New(slog.NewTextHandler(&logs, nil))}
			var set int64 = -1
			got := sv.ownMemoryLimit(writeCgroup(t, c.files), func(k string) string {
				if k == "GOMEMLIMIT" {
					return c.env
				}
				return ""
			}, func(n int64) int64 { set = n; return 0 })
			if got != c.want {
				t.Errorf("soft limit %d, want %d", got, c.want)
			}
			if wantSet := map[bool]int64{true: c.want, false: -1}[c.want != 0]; set != wantSet {
				t.Errorf("SetMemoryLimit given %d, want %d (-1: not called)", set, wantSet)
			}
			if !strings.Contains(logs.String(), c.wantInLog) {
				t.Errorf("log %q, want it to say %q", logs.String(), c.wantInLog)
			}
		})
	}
}
