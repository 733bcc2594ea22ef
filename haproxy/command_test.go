package haproxy

import (
	"cmp"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"

	"github.com/hapsuper/hapsuper/conf"
)

func TestCommand(t *testing.T) {
	const sock = "/var/run/hapsuper/master.sock,mode,600,level,admin"
	const override = "/var/run/hapsuper/override.cfg"
	tests := []struct {
		name    string
		haproxy []string // after "--"; nil means none
		notify  bool
		want    []string
	}{
		{"default argv", nil, false,
			[]string{"haproxy", "-f", "/usr/local/etc/haproxy/haproxy.cfg", "-W", "-db", "-S", sock, "-f", override}},
		{"default argv with notify", nil, true,
			[]string{"haproxy", "-f", "/usr/local/etc/haproxy/haproxy.cfg", "-Ws", "-db", "-S", sock, "-f", override}},
		{"user -S with options reused", []string{"haproxy", "-S", "/run/x.sock,level,admin", "-f", "h.cfg"}, false,
			[]string{"haproxy", "-S", "/run/x.sock,level,admin", "-f", "h.cfg", "-W", "-db", "-f", override}},
		{"user -W kept without notify", []string{"haproxy", "-W", "-f", "h.cfg"}, false,
			[]string{"haproxy", "-W", "-f", "h.cfg", "-db", "-S", sock, "-f", override}},
		{"user -W becomes -Ws with notify", []string{"haproxy", "-W", "-f", "h.cfg"}, true,
			[]string{"haproxy", "-Ws", "-f", "h.cfg", "-db", "-S", sock, "-f", override}},
		{"user -Ws kept without notify", []string{"haproxy", "-Ws", "-f", "h.cfg"}, false,
			[]string{"haproxy", "-Ws", "-f", "h.cfg", "-db", "-S", sock, "-f", override}},
		{"user -db not repeated", []string{"/usr/sbin/haproxy", "-db", "-f", "h.cfg"}, false,
			[]string{"/usr/sbin/haproxy", "-db", "-f", "h.cfg", "-W", "-S", sock, "-f", override}},
		{"everything given: only the override added", []string{"haproxy", "-Ws", "-db", "-S", "/s", "-f", "a.cfg", "-f", "b.cfg"}, true,
			[]string{"haproxy", "-Ws", "-db", "-S", "/s", "-f", "a.cfg", "-f", "b.cfg", "-f", override}},
		{"files after --: override is the last file", []string{"haproxy", "-W", "--", "a.cfg", "b.cfg"}, false,
			[]string{"haproxy", "-W", "-db", "-S", sock, "--", "a.cfg", "b.cfg", override}},
		{"a value that looks like -W is not -W", []string{"haproxy", "-f", "-W"}, false,
			[]string{"haproxy", "-f", "-W", "-W", "-db", "-S", sock, "-f", override}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var args []string
			if tt.haproxy != nil {
				args = append([]string{"--"}, tt.haproxy...)
			}
			s, err := conf.Parse(args, nil)
			if err != nil {
				t.Fatalf("Parse(%q): %v", args, err)
			}
			before := strings.Join(s.HAProxy, " ")
			got := Command(s, tt.notify)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Command(%v) =\n%q\nwant\n%q", tt.notify, got, tt.want)
			}
			if after := strings.Join(s.HAProxy, " "); after != before {
				t.Errorf("Command changed Settings.HAProxy from %q to %q", before, after)
			}
		})
	}
}

// writeFiles creates files (name → content) under dir.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestConfigFiles(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"haproxy.cfg":           "global\n",
		"conf.d/20-web.cfg":     "frontend web\n",
		"conf.d/10-global.cfg":  "global\n",
		"conf.d/README.md":      "not a config\n",
		"conf.d/sub.cfg/x.cfg":  "a directory named .cfg is skipped\n",
		"conf.d/.10-hidden.cfg": "HAProxy skips a hidden file\n",
		"conf.d/30-x.cfg.cfg":   "and a name whose first .cfg is not its end\n",
		"run/override.cfg":      overrideMark + "\nglobal\n",
		"run/users.cfg":         "global\n",
	})
	// A ConfigMap volume: the names are symbolic links into ..data.
	writeFiles(t, dir, map[string]string{"cm/..2026_01_01/haproxy.cfg": "global\n"})
	mustSymlink(t, "..2026_01_01", filepath.Join(dir, "cm/..data"))
	mustSymlink(t, "..data/haproxy.cfg", filepath.Join(dir, "cm/haproxy.cfg"))

	if err := syscall.Mkfifo(filepath.Join(dir, "conf.d/15-fifo.cfg"), 0o644); err != nil { // not a regular file: skipped
		t.Fatal(err)
	}
	p := func(name string) string { return filepath.Join(dir, name) }
	tests := []struct {
		override string // --override-file, relative to the test directory; "" is run/override.cfg
		name     string
		haproxy  []string
		want     []string
		wantErr  []string
	}{
		{name: "one file", haproxy: []string{"haproxy", "-f", p("haproxy.cfg")},
			want: []string{p("haproxy.cfg")}},
		{name: "directory in lexical order", haproxy: []string{"haproxy", "-f", p("haproxy.cfg"), "-f", p("conf.d")},
			want: []string{p("haproxy.cfg"), p("conf.d/10-global.cfg"), p("conf.d/20-web.cfg")}},
		{name: "ConfigMap volume", haproxy: []string{"haproxy", "-f", p("cm")},
			want: []string{p("cm/haproxy.cfg")}},
		{name: "relative to -C", haproxy: []string{"haproxy", "-C", dir, "-f", "haproxy.cfg"},
			want: []string{p("haproxy.cfg")}},
		{name: "files after --", haproxy: []string{"haproxy", "-db", "--", p("haproxy.cfg"), p("conf.d/20-web.cfg")},
			want: []string{p("haproxy.cfg"), p("conf.d/20-web.cfg")}},
		{name: "override file left out", haproxy: []string{"haproxy", "-f", p("haproxy.cfg"), "-f", p("run/override.cfg")},
			want: []string{p("haproxy.cfg")}},
		{name: "override file one of the user's", override: "run/users.cfg", haproxy: []string{"haproxy", "-f", p("haproxy.cfg"), "-f", p("run/users.cfg")},
			wantErr: []string{"-f " + p("run/users.cfg") + " is also --override-file", "was not written by hapsuper"}},
		{name: "missing file", haproxy: []string{"haproxy", "-f", p("haproxy.cfg"), "-f", p("nope.cfg")},
			wantErr: []string{p("nope.cfg"), "does not exist", "fix the -f path"}},
		{name: "no -f", haproxy: []string{"haproxy", "-db"},
			wantErr: []string{"no file given", "add -f"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			override := cmp.Or(tt.override, "run/override.cfg")
			s, err := conf.Parse(append([]string{"--override-file", p(override), "--"}, tt.haproxy...), nil)
			if err != nil {
				t.Fatal(err)
			}
			got, err := ConfigFiles(s)
			if tt.wantErr != nil {
				if err == nil {
					t.Fatalf("ConfigFiles() = %q, want an error", got)
				}
				for _, w := range tt.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("ConfigFiles() error %q does not contain %q", err, w)
					}
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ConfigFiles() = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func mustSymlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}
