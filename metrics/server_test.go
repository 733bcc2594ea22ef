package metrics

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hapsuper/hapsuper/drain"
	"github.com/hapsuper/hapsuper/status"
)

// server is one running serve() on 127.0.0.1, stopped at the end of the test.
type server struct {
	addr   string
	cancel context.CancelFunc
	done   chan error
}

func startServer(t *testing.T, b *status.Board, l limits) *server {
	t.Helper()
	return startServerWith(t, handler(collector{board: b, now: time.Now}), l)
}

// startServerWith serves h as serve() does.
func startServerWith(t *testing.T, h http.Handler, l limits) *server {
	t.Helper()
	ln, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &server{addr: ln.Addr().String(), cancel: cancel, done: make(chan error, 1)}
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
	go func() { s.done <- serve(ctx, ln, h, l, log) }()
	t.Cleanup(func() { s.stop(t, 5*time.Second) })
	return s
}

// stop cancels the context and returns Serve's error, failing the test if
// Serve takes longer than within.
func (s *server) stop(t *testing.T, within time.Duration) error {
	t.Helper()
	s.cancel()
	select {
	case err, ok := <-s.done:
		if ok {
			close(s.done)
		}
		return err
	case <-time.After(within):
		t.Fatalf("Serve did not return within %s of the context's end", within)
		return nil
	}
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read %s: %v", url, err)
	}
	return resp.StatusCode, string(body)
}

func TestServeScrapeAndHealth(t *testing.T) {
	b := status.NewBoard(status.Snapshot{Phase: drain.Serving, ObservedAt: time.Now(), Workers: []status.Worker{{PID: 7, Sessions: 3}}})
	s := startServer(t, b, defaultLimits)

	resp, err := http.Get("http://" + s.addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/plain; version=0.0.4; charset=utf-8" {
		t.Errorf("GET /metrics: Content-Type %q, want Prometheus' text format 0.0.4", ct)
	}
	code, body := get(t, "http://"+s.addr+"/metrics")
	if code != http.StatusOK {
		t.Fatalf("GET /metrics: %d, want 200", code)
	}
	for _, want := range []string{`hapsuper_phase{phase="serving"} 1`, "hapsuper_haproxy_sessions 3", "hapsuper_master_cli_up 1", "go_goroutines ", "process_open_fds "} {
		if !strings.Contains(body, want) {
			t.Errorf("GET /metrics: no %q in\n%s", want, body)
		}
	}

	// /healthz stays 200 through the drain: it is liveness, not readiness.
	for _, ph := range drain.Phases() {
		b.Publish(status.Snapshot{Phase: ph})
		if code, body := get(t, "http://"+s.addr+"/healthz"); code != http.StatusOK || body != "ok\n" {
			t.Errorf("GET /healthz in phase %s: %d %q, want 200 \"ok\\n\"", ph, code, body)
		}
	}
	if code, _ := get(t, "http://"+s.addr+"/nothing"); code != http.StatusNotFound {
		t.Errorf("GET /nothing: %d, want 404", code)
	}
	resp, err = http.Post("http://"+s.addr+"/metrics", "text/plain", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /metrics: %d, want 405", resp.StatusCode)
	}

	if err := s.stop(t, 3*time.Second); err != nil {
		t.Fatalf("Serve after cancel: %v, want nil", err)
	}
	if c, err := net.DialTimeout("tcp", s.addr, time.Second); err == nil {
		c.Close()
		t.Errorf("%s still accepts connections after Serve returned", s.addr)
	}
}

func TestListenTaken(t *testing.T) {
	ln, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, err = Listen(ln.Addr().String())
	if err == nil || !strings.Contains(err.Error(), "--metrics-addr") || !strings.Contains(err.Error(), ln.Addr().String()) {
		t.Fatalf("Listen on a taken port: %v, want an error naming the address and --metrics-addr", err)
	}
}

// slowLimits cut slow clients fast enough for a test.
func slowLimits() limits {
	l := defaultLimits
	l.readHeader, l.read, l.connections, l.shutdown = 300*time.Millisecond, 500*time.Millisecond, 2, 500*time.Millisecond
	return l
}

// holdOpen opens a connection that sends half a request header and nothing
// more, as a slowloris does.
func holdOpen(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := io.WriteString(c, "GET /metrics HTTP/1.1\r\nHost: x\r\n"); err != nil {
		t.Fatal(err)
	}
	return c
}

// A client that never finishes its header is cut off after readHeader.
func TestServeCutsSlowloris(t *testing.T) {
	l := slowLimits()
	s := startServer(t, status.NewBoard(status.Snapshot{}), l)
	c := holdOpen(t, s.addr)
	start := time.Now()
	c.SetReadDeadline(time.Now().Add(3 * time.Second))
	_, err := c.Read(make([]byte, 512))
	took := time.Since(start)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("slowloris still connected after %s (read header timeout %s)", took, l.readHeader)
	}
	if took < l.readHeader-50*time.Millisecond || took > l.readHeader+time.Second {
		t.Errorf("slowloris cut after %s (%v), want about %s", took, err, l.readHeader)
	}
}

// Connections past the limit wait while every slot has its request in the
// handler; the server never holds more at once.
func TestServeLimitsConnections(t *testing.T) {
	l := slowLimits() // 2 connections
	release := make(chan struct{})
	inHandler := make(chan struct{}, l.connections)
	h := http.NewServeMux()
	h.HandleFunc("GET /block", func(w http.ResponseWriter, _ *http.Request) {
		inHandler <- struct{}{}
		select {
		case <-release:
		case <-time.After(5 * time.Second):
		}
	})
	h.Handle("GET /healthz", handler(collector{board: status.NewBoard(status.Snapshot{}), now: time.Now}))
	s := startServerWith(t, h, l)
	for range l.connections {
		c, err := net.DialTimeout("tcp", s.addr, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := io.WriteString(c, "GET /block HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
	}
	for range l.connections {
		select {
		case <-inHandler:
		case <-time.After(3 * time.Second):
			t.Fatal("the blocking requests did not reach the handler")
		}
	}

	third, err := net.DialTimeout("tcp", s.addr, time.Second) // the kernel's backlog accepts it
	if err != nil {
		t.Fatal(err)
	}
	defer third.Close()
	if _, err := io.WriteString(third, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	third.SetReadDeadline(time.Now().Add(400 * time.Millisecond))
	r := bufio.NewReader(third)
	if line, err := r.ReadString('\n'); err == nil {
		t.Fatalf("third connection answered %q while the limit of %d was in the handler", line, l.connections)
	}
	release <- struct{}{} // one request ends; its connection waits and is closed for the third
	third.SetReadDeadline(time.Now().Add(3 * time.Second))
	line, err := r.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "HTTP/1.1 200") {
		t.Fatalf("third connection after one request ended: %q, %v; want HTTP/1.1 200", line, err)
	}
	close(release)
}

func TestServeRejectsLargeHeader(t *testing.T) {
	s := startServer(t, status.NewBoard(status.Snapshot{}), defaultLimits)
	req, _ := http.NewRequest(http.MethodGet, "http://"+s.addr+"/healthz", nil)
	req.Header.Set("X-Big", strings.Repeat("a", 2*defaultLimits.maxHeader))
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("header of %d bytes: %d, want 431", 2*defaultLimits.maxHeader, resp.StatusCode)
	}
}

// A connection in the middle of a request does not hold Serve past its
// shutdown bound once the context ends.
func TestServeShutdownIsBounded(t *testing.T) {
	l := slowLimits()
	l.readHeader, l.read = 10*time.Second, 10*time.Second
	s := startServer(t, status.NewBoard(status.Snapshot{}), l)
	holdOpen(t, s.addr)
	time.Sleep(50 * time.Millisecond) // let the server accept it
	start := time.Now()
	if err := s.stop(t, l.shutdown+2*time.Second); err != nil {
		t.Fatalf("Serve after cancel: %v, want nil", err)
	}
	if took := time.Since(start); took > l.shutdown+500*time.Millisecond {
		t.Errorf("Serve returned %s after cancel, want within %s + 0.5s", took, l.shutdown)
	}
}

// Serve returns an error, not nil, when it stops for another reason than
// its context.
func TestServeListenerClosed(t *testing.T) {
	ln, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		done <- Serve(context.Background(), ln, status.NewBoard(status.Snapshot{}), slog.New(slog.DiscardHandler))
	}()
	time.Sleep(50 * time.Millisecond)
	ln.Close()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("Serve on a closed listener returned nil, want an error")
		}
	case <-time.After(3 * time.Second):
		t.Fatal("Serve did not return within 3s of its listener's close")
	}
}

// Idle keep-alive connections holding every slot do not keep a new
// scraper out: the one idle the longest is closed for it (16 idle
// keep-alive connections denied the endpoint for their 65 s idle timeout).
func TestServeIdleKeepAliveDoesNotDeny(t *testing.T) {
	l := slowLimits() // 2 connections
	s := startServer(t, status.NewBoard(status.Snapshot{}), l)
	for range l.connections {
		c, err := net.DialTimeout("tcp", s.addr, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(3 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close() // the connection stays open, idle
	}
	client := &http.Client{Timeout: 2 * time.Second}
	resp, err := client.Get("http://" + s.addr + "/metrics")
	if err != nil {
		t.Fatalf("scrape with %d idle keep-alive connections open: %v", l.connections, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape: %d", resp.StatusCode)
	}
}

// Connections that hold every slot without a request in the handler, silent
// since they connected or sending half a header, do not delay a scrape:
// with the default limits (16 connections, 5 s to read a header), scrapes
// each behind 16 new such connections take about as long as without (16
// silent connections used to delay every scrape to 4.3-5.0 s).
func TestServeHeldConnectionsDoNotDelayScrapes(t *testing.T) {
	for _, tc := range []struct {
		name string
		send string
	}{
		{"silent", ""},
		{"half a header", "GET /metrics HTTP/1.1\r\nHost: x\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := startServer(t, status.NewBoard(status.Snapshot{Phase: drain.Serving}), defaultLimits)
			const scrapes = 5
			baseline := timeScrapes(t, s.addr, scrapes, func() {})
			var conns []net.Conn
			defer func() {
				for _, c := range conns {
					c.Close()
				}
			}()
			hold := func() { // 16 new connections; the server accepts them before the scrape's, in the kernel's order
				for range defaultLimits.connections {
					c, err := net.DialTimeout("tcp", s.addr, time.Second)
					if err != nil {
						t.Fatal(err)
					}
					conns = append(conns, c)
					if _, err := io.WriteString(c, tc.send); err != nil {
						t.Fatal(err)
					}
				}
			}
			held := timeScrapes(t, s.addr, scrapes, hold)
			t.Logf("scrapes alone %v, each behind %d new %s connections %v", baseline, defaultLimits.connections, tc.name, held)
			bound := max(100*time.Millisecond, 3*median(baseline))
			if m := median(held); m > bound {
				t.Errorf("median scrape behind %d held connections took %v, want within %v (median alone %v)", defaultLimits.connections, m, bound, median(baseline))
			}
			for _, d := range held {
				if d > time.Second {
					t.Errorf("a scrape behind %d held connections took %v, want well under the %v read-header timeout", defaultLimits.connections, d, defaultLimits.readHeader)
				}
			}
		})
	}
}

// timeScrapes scrapes addr n times, each on a new connection after before,
// and returns how long each took, from dial to the end of the body.
func timeScrapes(t *testing.T, addr string, n int, before func()) []time.Duration {
	t.Helper()
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	var took []time.Duration
	for range n {
		before()
		start := time.Now()
		resp, err := client.Get("http://" + addr + "/metrics")
		if err != nil {
			t.Fatalf("scrape: %v", err)
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("scrape: %d, %v", resp.StatusCode, err)
		}
		took = append(took, time.Since(start))
	}
	return took
}

// median returns the middle of ds.
func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
