package haproxy

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hapsuper/hapsuper/conf"
)

func TestInspect(t *testing.T) {
	http := func(n string) Frontend { return Frontend{Name: n, Mode: "http"} }
	graceful := func(n string, idle time.Duration) Frontend {
		return Frontend{Name: n, Mode: "http", Graceful: true, IdleBound: idle}
	}
	tcp := func(n string) Frontend { return Frontend{Name: n, Mode: "tcp", Graceful: true} }
	tests := []struct {
		file          string
		ignore        []string
		frontends     []Frontend
		hardStopAfter time.Duration
		warnings      []string // each must match exactly one warning, and nothing else may warn
	}{
		{file: "basic-http.cfg",
			frontends: []Frontend{http("stats"), http("web")},
			warnings: []string{
				"frontend stats: idle keep-alive", "frontend stats: HTTP/2",
				"frontend web: idle keep-alive connections are closed at soft stop, so a client reusing one can fail, and its kept-alive requests keep the drain from ending before --max-wait: add `option idle-close-on-response` to defaults or frontend web",
				"frontend web: HTTP/2 connections without streams stay open after the soft stop until the client closes them: add `timeout client-fin`",
			}},
		{file: "basic-http.cfg", ignore: []string{"stats"},
			frontends: []Frontend{http("stats"), http("web")},
			warnings:  []string{"frontend web: idle keep-alive", "frontend web: HTTP/2"}},
		{file: "tcp.cfg", ignore: []string{"health"},
			frontends: []Frontend{http("health"), tcp("postgres"), tcp("redis")}},
		{file: "graceful.cfg",
			frontends: []Frontend{graceful("admin", 10*time.Second), http("api"), graceful("web", 10*time.Second)},
			warnings:  []string{"frontend api: idle keep-alive"}}, // `no option idle-close-on-response`
		{file: "hard-stop-after.cfg",
			frontends:     []Frontend{graceful("web", 10*time.Second)},
			hardStopAfter: time.Hour,
			warnings:      []string{"global hard-stop-after 1h is longer than the stop budget 28s (--grace-period − --margin): hapsuper's override file sets hard-stop-after 28s, which wins"}},
		{file: "ingress-like.cfg", ignore: []string{"healthz", "stats"},
			frontends:     []Frontend{tcp("_front__tls"), http("_front_http"), http("healthz"), http("stats")},
			hardStopAfter: 15 * time.Minute,
			warnings: []string{
				"frontend _front_http: idle keep-alive",
				"global hard-stop-after 15m is longer than the stop budget 28s",
			}},
		{file: "conditional.cfg",
			frontends:     []Frontend{http("legacy"), graceful("web", 10*time.Second)},
			hardStopAfter: 20 * time.Second,
			warnings:      []string{"frontend legacy: idle keep-alive", "frontend legacy: HTTP/2"}},
		{file: "idle-bound.cfg",
			frontends: []Frontend{graceful("bounded", 4*time.Second), graceful("long", time.Minute), graceful("unbounded", 0)},
			warnings: []string{
				"frontend long: idle kept-alive connections may stay 1m0s after the soft stop (its keep-alive timeout), longer than the stop budget 28s allows",
				"frontend unbounded: nothing ends an idle kept-alive connection after the soft stop",
			}},
		{file: "close-spread.cfg",
			frontends: []Frontend{graceful("web", 3*time.Second)}},
		// kubernetes-ingress's ConfigMap: option idle-close-on-response in
		// frontend-config-snippet, which the controller writes between
		// snippet markers; HAProxy applies what is between them.
		{file: "haproxytech-snippets.cfg", ignore: []string{"healthz", "stats"},
			frontends: []Frontend{http("healthz"), graceful("http", 10*time.Second), graceful("https", 10*time.Second), http("stats")}},
		{file: "haproxytech-frontend-snippet.cfg", ignore: []string{"healthz", "stats"},
			frontends:     []Frontend{http("healthz"), graceful("http", time.Minute), graceful("https", time.Minute), http("stats")},
			hardStopAfter: 30 * time.Minute, // from global-config-snippet
			warnings: []string{
				"frontend http: idle kept-alive connections may stay 1m0s", "frontend http: HTTP/2",
				"frontend https: idle kept-alive connections may stay 1m0s", "frontend https: HTTP/2",
				"global hard-stop-after 30m is longer than the stop budget",
			}},
	}
	for _, tt := range tests {
		t.Run(tt.file+strings.Join(tt.ignore, ","), func(t *testing.T) {
			s, err := conf.Parse([]string{"--ignore-frontends", strings.Join(tt.ignore, ",")}, nil)
			if err != nil {
				t.Fatal(err)
			}
			in, err := Inspect([]string{filepath.Join("testdata", tt.file)}, s)
			if err != nil {
				t.Fatalf("Inspect(%s): %v", tt.file, err)
			}
			if !reflect.DeepEqual(in.Frontends, tt.frontends) {
				t.Errorf("Frontends = %v, want %v", in.Frontends, tt.frontends)
			}
			if in.HardStopAfter != tt.hardStopAfter {
				t.Errorf("HardStopAfter = %v, want %v", in.HardStopAfter, tt.hardStopAfter)
			}
			checkWarnings(t, in.Warnings, tt.warnings)
		})
	}
}

func checkWarnings(t *testing.T, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("got %d warnings, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
	}
	for _, w := range want {
		n := 0
		for _, g := range got {
			if strings.Contains(g, w) {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%d warnings contain %q, want 1:\n%s", n, w, strings.Join(got, "\n"))
		}
	}
}

func TestInspectUnknownIgnoredFrontend(t *testing.T) {
	s, err := conf.Parse([]string{"--ignore-frontends", "stats,health"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Inspect([]string{"testdata/basic-http.cfg"}, s)
	if err == nil || !strings.Contains(err.Error(), `no frontend "health"`) || !strings.Contains(err.Error(), "it has: stats, web") {
		t.Errorf("Inspect error = %v, want one naming health and listing stats, web", err)
	}
}

// A defaults section applies to the proxies after it in the next files too,
// as in HAProxy (checked with haproxy -c: option httplog is refused in tcp
// mode when the defaults come from the first file).
func TestInspectDefaultsAcrossFiles(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"10-defaults.cfg": "defaults\n    mode http\n    option idle-close-on-response\n    timeout client-fin 5s\n    timeout http-keep-alive 5s\n",
		"20-web.cfg":      "frontend web\n    bind :8080\n",
	})
	s, err := conf.Parse([]string{"--", "haproxy", "-f", dir}, nil)
	if err != nil {
		t.Fatal(err)
	}
	files, err := ConfigFiles(s)
	if err != nil {
		t.Fatal(err)
	}
	in, err := Inspect(files, s)
	if err != nil {
		t.Fatal(err)
	}
	if want := []Frontend{{Name: "web", Mode: "http", Graceful: true, IdleBound: 5 * time.Second}}; !reflect.DeepEqual(in.Frontends, want) {
		t.Errorf("Frontends = %v, want %v", in.Frontends, want)
	}
	checkWarnings(t, in.Warnings, nil)
}

func TestInspectErrors(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"bad-time.cfg": "global\n    hard-stop-after soon\n"})
	unreadable := filepath.Join(dir, "unreadable.cfg")
	if err := os.Mkdir(unreadable, 0o755); err != nil { // a directory cannot be read as a file
		t.Fatal(err)
	}
	s, err := conf.Parse(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		files []string
		want  []string
	}{
		{[]string{"testdata/basic-http.cfg", filepath.Join(dir, "missing.cfg")}, []string{"read HAProxy configuration", "missing.cfg"}},
		{[]string{unreadable}, []string{"read HAProxy configuration", "unreadable.cfg"}},
		{[]string{filepath.Join(dir, "bad-time.cfg")}, []string{`hard-stop-after "soon"`, "bad-time.cfg", "such as 30s"}},
	}
	for _, tt := range tests {
		_, err := Inspect(tt.files, s)
		for _, w := range tt.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("Inspect(%q) error = %v, want one containing %q", tt.files, err, w)
			}
		}
	}
}

func TestParseHAProxyTime(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"1500", 1500 * time.Millisecond, true},
		{"250ms", 250 * time.Millisecond, true},
		{"30s", 30 * time.Second, true},
		{"5m", 5 * time.Minute, true},
		{"1h", time.Hour, true},
		{"2d", 48 * time.Hour, true},
		{"100us", 100 * time.Microsecond, true},
		{"1.5s", 0, false},
		{"s", 0, false},
		{"-1s", 0, false},
		{"10x", 0, false},
	}
	for _, tt := range tests {
		got, err := parseHAProxyTime(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("parseHAProxyTime(%q) = %v, %v; want %v, ok=%v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

// What the inspection reads: regular files only, never blocking on a FIFO
// or reading a device, the snippet markers blanked, the backend sections
// left out, and no more than MaxConfigSize in all: a clear error, that
// wraps ErrNotInspected, names the file and the cap.
func TestInspectReadsRegularFilesBounded(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.cfg")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	web := "defaults\n    mode http\n    option idle-close-on-response\n    timeout client-fin 5s\n    timeout http-keep-alive 5s\nfrontend web\n    bind :8080\n"
	writeFiles(t, dir, map[string]string{"web.cfg": web})
	big := filepath.Join(dir, "big.cfg")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(MaxConfigSize - 100); err != nil { // sparse: zeros
		t.Fatal(err)
	}
	f.Close()
	s, err := conf.Parse(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		files []string
		want  []string
	}{
		{[]string{filepath.Join(dir, "web.cfg"), fifo}, []string{fifo, "a FIFO", "regular files only"}},
		{[]string{"/dev/zero"}, []string{"/dev/zero", "a device", "regular files only"}},
		{[]string{big, filepath.Join(dir, "web.cfg")}, []string{filepath.Join(dir, "web.cfg"), "over 16 MiB"}},
	}
	for _, tt := range tests {
		done := make(chan error, 1)
		go func() { _, err := Inspect(tt.files, s); done <- err }()
		select {
		case err := <-done:
			if !errors.Is(err, ErrNotInspected) {
				t.Errorf("Inspect(%q) error = %v, want ErrNotInspected", tt.files, err)
			}
			for _, w := range tt.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("Inspect(%q) error = %v, want one containing %q", tt.files, err, w)
				}
			}
		case <-time.After(time.Minute):
			t.Fatalf("Inspect(%q) still reading after a minute", tt.files)
		}
	}
}

// Backends are not parsed (nothing inspected is in them), but conditional
// blocks around them stay balanced, and a frontend after them is read.
func TestInspectSkipsBackends(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"haproxy.cfg": `defaults
    mode http
    timeout client-fin 5s
    timeout http-keep-alive 5s
backend b1
    option idle-close-on-response
    server s1 127.0.0.1:1
.if defined(NEVER)
backend b2
    server s2 127.0.0.1:2
.endif
frontend web
    option idle-close-on-response
    bind :8080
backend b3
  frontend_is_no_section_here
listen admin
    bind :8081
`})
	s, err := conf.Parse([]string{"--ignore-frontends", "admin"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	in, err := Inspect([]string{filepath.Join(dir, "haproxy.cfg")}, s)
	if err != nil {
		t.Fatal(err)
	}
	want := []Frontend{{Name: "admin", Mode: "http"}, {Name: "web", Mode: "http", Graceful: true, IdleBound: 5 * time.Second}}
	if !reflect.DeepEqual(in.Frontends, want) {
		t.Errorf("Frontends = %v, want %v", in.Frontends, want)
	}
	got := string(withoutBackends([]byte("frontend a\n  x\nbackend b\n  y\n.if 1\n  z\n.endif\nlisten c\n  w\n")))
	if want := "frontend a\n  x\n\n\n.if 1\n\n.endif\nlisten c\n  w\n"; got != want {
		t.Errorf("withoutBackends = %q, want %q (lines kept in number)", got, want)
	}
}

// ingressConfig is a generated configuration of n backends, shaped like a
// controller's: a few frontends, the backends with servers.
func ingressConfig(n int) string {
	var b strings.Builder
	b.WriteString("global\n    maxconn 20000\ndefaults\n    mode http\n    option idle-close-on-response\n    timeout client 50s\n    timeout client-fin 5s\n    timeout http-keep-alive 10s\n")
	b.WriteString("frontend http\n    bind :80\n    use_backend %[var(txn.path_match),field(1,.)]\nfrontend stats\n    bind :1024\n    stats enable\n")
	for i := range n {
		fmt.Fprintf(&b, "backend ns%d_svc%d_http\n    mode http\n    balance roundrobin\n    option forwardfor\n    http-request set-header X-Forwarded-Proto https if { ssl_fc }\n    server SRV_1 10.0.%d.%d:8080 check weight 128\n    server SRV_2 10.1.%d.%d:8080 check weight 128 disabled\n",
			i/100, i, i/250, i%250, i/250, i%250)
	}
	return b.String()
}

// BenchmarkInspect10kBackends inspects a configuration of 10,000 backends,
// as after a controller's reload; -benchmem gives the allocations.
func BenchmarkInspect10kBackends(b *testing.B) {
	dir := b.TempDir()
	cfg := filepath.Join(dir, "haproxy.cfg")
	text := ingressConfig(10000)
	if err := os.WriteFile(cfg, []byte(text), 0o644); err != nil {
		b.Fatal(err)
	}
	s, err := conf.Parse(nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := Inspect([]string{cfg}, s); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(text))/(1<<20), "MiB/config")
}
