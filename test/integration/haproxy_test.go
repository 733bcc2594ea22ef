package integration

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hapsuper/hapsuper/test/harness"
)

// haproxyBin is the path of HAProxy: on the host (2.6) and inside each
// root of hack/haproxy-root.sh (3.0, 3.2, 3.4).
const haproxyBin = "/usr/sbin/haproxy"

// backend is the in-test origin server behind HAProxy: "/" answers 200 at
// once, "/slow?d=5s" sleeps d (at most two minutes) and then answers 200.
type backend struct {
	addr string
	srv  *http.Server
}

// maxSlow bounds the sleep of /slow so that no handler outlives the suite.
const maxSlow = 2 * time.Minute

// startBackend serves on 127.0.0.1 on a free port until the test ends.
func startBackend(t *testing.T) *backend {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen for the backend: %v", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		d, err := time.ParseDuration(r.URL.Query().Get("d"))
		if err != nil || d < 0 || d > maxSlow {
			http.Error(w, "bad d", http.StatusBadRequest)
			return
		}
		select {
		case <-time.After(d):
		case <-r.Context().Done():
			return
		}
		_, _ = w.Write([]byte("slow ok\n"))
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	b := &backend{addr: ln.Addr().String(), srv: &http.Server{Handler: mux, ReadHeaderTimeout: 2 * maxSlow}}
	go func() { _ = b.srv.Serve(ln) }()
	t.Cleanup(func() { _ = b.srv.Close() })
	return b
}

// freePort returns a port of 127.0.0.1 that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	port, err := harness.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// haproxyConfig describes one test's HAProxy configuration. A zero port
// leaves that frontend out.
type haproxyConfig struct {
	Backend   string // host:port of the origin server
	Web       int    // HTTP/1.1 frontend "web"
	H2        int    // h2c frontend "h2" (bind ... proto h2)
	TCP       int    // TCP-mode frontend "tcp"
	Probe     int    // frontend "probe" answering 200 itself, meant to be ignored
	IdleClose bool   // option idle-close-on-response on the HTTP frontends
	// WebNoIdleClose leaves the option out of frontend web only.
	WebNoIdleClose bool
	ClientFin      bool   // timeout client-fin 1s on the HTTP frontends
	StatsSocket    string // a worker stats socket path, or none
	Broken         bool   // append a line HAProxy rejects
}

// newConfig starts a backend and returns a config in front of it with every
// frontend on its own free port and the good-practice options set; tests
// switch off what they need.
func newConfig(t *testing.T) haproxyConfig {
	b := startBackend(t)
	return haproxyConfig{
		Backend:   b.addr,
		Web:       freePort(t),
		H2:        freePort(t),
		TCP:       freePort(t),
		Probe:     freePort(t),
		IdleClose: true,
		ClientFin: true,
	}
}

func (c haproxyConfig) webAddr() string { return fmt.Sprintf("127.0.0.1:%d", c.Web) }
func (c haproxyConfig) h2Addr() string  { return fmt.Sprintf("127.0.0.1:%d", c.H2) }
func (c haproxyConfig) tcpAddr() string { return fmt.Sprintf("127.0.0.1:%d", c.TCP) }

// render writes the configuration text.
func (c haproxyConfig) render() string {
	var b strings.Builder
	b.WriteString("global\n")
	if c.StatsSocket != "" {
		fmt.Fprintf(&b, "    stats socket %s mode 600 level admin\n", c.StatsSocket)
	}
	b.WriteString(`
defaults
    mode http
    timeout connect 2s
    timeout client 60s
    timeout server 150s
    timeout http-keep-alive 30s
    timeout http-request 10s
`)
	httpOpts := ""
	if c.IdleClose {
		httpOpts += "    option idle-close-on-response\n"
	}
	if c.ClientFin {
		httpOpts += "    timeout client-fin 1s\n"
	}
	if c.Web != 0 {
		webOpts := httpOpts
		if c.WebNoIdleClose {
			webOpts = strings.Replace(webOpts, "    option idle-close-on-response\n", "", 1)
		}
		fmt.Fprintf(&b, "\nfrontend web\n    bind 127.0.0.1:%d\n%s    default_backend be_http\n", c.Web, webOpts)
	}
	if c.H2 != 0 {
		fmt.Fprintf(&b, "\nfrontend h2\n    bind 127.0.0.1:%d proto h2\n%s    default_backend be_http\n", c.H2, httpOpts)
	}
	if c.TCP != 0 {
		fmt.Fprintf(&b, "\nfrontend tcp\n    mode tcp\n    bind 127.0.0.1:%d\n    default_backend be_tcp\n", c.TCP)
	}
	if c.Probe != 0 {
		fmt.Fprintf(&b, "\nfrontend probe\n    bind 127.0.0.1:%d\n%s    http-request return status 200 content-type text/plain string ok\n", c.Probe, httpOpts)
	}
	fmt.Fprintf(&b, "\nbackend be_http\n    server origin %s\n", c.Backend)
	fmt.Fprintf(&b, "\nbackend be_tcp\n    mode tcp\n    server origin %s\n", c.Backend)
	if c.Broken {
		b.WriteString("\nbackend be_broken\n    this-is-not-a-keyword at all\n")
	}
	return b.String()
}

// write stores the configuration as dir/haproxy.cfg and returns its path.
func (c haproxyConfig) write(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "haproxy.cfg")
	if err := os.WriteFile(path, []byte(c.render()), 0o644); err != nil {
		t.Fatalf("write haproxy config: %v", err)
	}
	return path
}

// waitListening dials addr until it accepts, at most timeout.
func waitListening(t *testing.T, addr string, timeout time.Duration) {
	t.Helper()
	if err := harness.WaitListening(nil, addr, timeout); err != nil {
		t.Fatal(err)
	}
}
