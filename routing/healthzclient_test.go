package routing

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime/pprof"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// healthzServer answers GET /healthz and counts the connections it accepted.
func healthzServer(t *testing.T, h http.HandlerFunc) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, &conns
}

// toServer dials srv whatever the address asked.
func toServer(srv *httptest.Server) dialFunc {
	return func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, srv.Listener.Addr().String())
	}
}

func okHealthz(w http.ResponseWriter, _ *http.Request) {
	fmt.Fprint(w, `{"currentTime":"2026-01-01T00:00:00Z","status":{"IPv4":{"lastUpdated":"2026-01-01T00:00:00Z","healthy":true}}}`)
}

// A node's connection is kept for the next request; a connection the node
// closed meanwhile is replaced without a failed poll.
func TestHealthzClientKeepsAndReplacesConnection(t *testing.T) {
	srv, conns := healthzServer(t, okHealthz)
	c := newHealthzClient(toServer(srv), time.Second)
	defer c.CloseIdleConnections()
	ctx := t.Context()
	for i := range 3 {
		status, body, err := c.get(ctx, "10.0.0.2:10256")
		if err != nil || status != http.StatusOK || !bytes.Contains(body, []byte(`"IPv4"`)) {
			t.Fatalf("request %d: %d %q %v", i, status, body, err)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("%d connections for 3 requests, want 1 kept alive", n)
	}
	srv.CloseClientConnections() // the node drops the idle connection
	if _, _, err := c.get(ctx, "10.0.0.2:10256"); err != nil {
		t.Fatalf("after the node closed the kept connection: %v, want the request sent again on a new one", err)
	}
	if n := conns.Load(); n != 2 {
		t.Errorf("%d connections, want 2", n)
	}
	c.closeIdle("10.0.0.2:10256")
	if c.idle.len() != 0 {
		t.Errorf("idle connections after closeIdle: %d", c.idle.len())
	}
}

// Kept connections cost no goroutine: net/http's transport parks two per
// connection, which at a thousand nodes was most of the fan-out's RSS.
func TestHealthzClientIdleConnectionsHaveNoGoroutines(t *testing.T) {
	srv, conns := healthzServer(t, okHealthz)
	c := newHealthzClient(toServer(srv), time.Second)
	defer c.CloseIdleConnections()
	for i := range 50 {
		if _, _, err := c.get(t.Context(), fmt.Sprintf("10.0.1.%d:10256", i)); err != nil {
			t.Fatal(err)
		}
	}
	if n, idle := conns.Load(), c.idle.len(); n != 50 || idle != 50 {
		t.Fatalf("%d connections, %d idle, want 50 each", n, idle)
	}
	var prof bytes.Buffer
	if err := pprof.Lookup("goroutine").WriteTo(&prof, 2); err != nil {
		t.Fatal(err)
	}
	for g := range strings.SplitSeq(prof.String(), "\n\n") {
		if strings.Contains(g, "healthzClient") || strings.Contains(g, "net/http.(*persistConn)") {
			t.Errorf("a goroutine of the client outlives its request:\n%s", g)
		}
	}
}

// An answer that does not come is a timeout (the node stays pending);
// a node that does not accept is a dial error (unverified).
func TestHealthzClientTimeoutAndRefusal(t *testing.T) {
	block := make(chan struct{})
	srv, _ := healthzServer(t, func(http.ResponseWriter, *http.Request) { <-block })
	defer close(block)
	c := newHealthzClient(toServer(srv), time.Second)
	defer c.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, _, err := c.get(ctx, "10.0.0.2:10256")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("silent node: %v, want context.DeadlineExceeded", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("silent node took %v, want about the 200ms timeout", took)
	}
	refused := newHealthzClient(func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, closedAddr(t))
	}, time.Second)
	var de *dialError
	if _, _, err := refused.get(t.Context(), "10.0.0.3:10256"); !errors.As(err, &de) {
		t.Errorf("refused: %v, want a dial error", err)
	}
}

// A listener on :10256 that sends an endless status line, or endless
// headers, is cut off after maxHealthzHead bytes, well within the
// request's timeout, with an error that says so; the connection is not kept.
func TestHealthzClientBoundsTheAnswer(t *testing.T) {
	for _, tc := range []struct{ name, head string }{
		{"status line", "HTTP/1.1 200 "},
		{"header", "HTTP/1.1 200 OK\r\nX-Endless: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			var sent atomic.Int64
			go func() {
				conn, err := ln.Accept()
				if err != nil {
					return
				}
				defer conn.Close()
				_, _ = conn.Write([]byte(tc.head))
				chunk := bytes.Repeat([]byte("a"), 4096)
				for sent.Load() < 64<<20 {
					n, err := conn.Write(chunk)
					sent.Add(int64(n))
					if err != nil {
						return
					}
				}
			}()
			c := newHealthzClient(func(ctx context.Context, network, _ string) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, network, ln.Addr().String())
			}, time.Second)
			defer c.CloseIdleConnections()
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			defer cancel()
			_, _, err = c.get(ctx, "10.0.0.4:10256")
			if !errors.Is(err, errHeadTooLong) {
				t.Fatalf("endless %s: %v, want errHeadTooLong", tc.name, err)
			}
			if c.idle.len() != 0 {
				t.Errorf("the connection of a too-long answer was kept")
			}
		})
	}
}

// An idle connection holds no read buffer: thousands are kept in a
// drain's fan-out, a buffer each made most of their heap.
func TestHealthzClientIdleConnectionsHoldNoBuffer(t *testing.T) {
	srv, _ := healthzServer(t, okHealthz)
	c := newHealthzClient(toServer(srv), time.Second)
	defer c.CloseIdleConnections()
	for i := range 20 {
		if _, err := c.poll(t.Context(), fmt.Sprintf("10.0.2.%d:10256", i)); err != nil {
			t.Fatal(err)
		}
	}
	c.idle.mu.Lock()
	defer c.idle.mu.Unlock()
	if len(c.idle.idle) != 20 {
		t.Fatalf("%d idle connections, want 20", len(c.idle.idle))
	}
	for addr, kc := range c.idle.idle {
		if kc.x != nil {
			t.Errorf("idle connection to %s holds a %d-byte read buffer", addr, kc.x.r.Size())
		}
	}
}

// Bytes the node sent past an answer stay with its kept connection and
// are read as the next answer, as they would be on the wire.
func TestHealthzClientKeepsBytesPastAnAnswer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	answer := func(body string) string {
		return fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	}
	served := make(chan error, 1)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			served <- err
			return
		}
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(5 * time.Second))
		r := bufio.NewReader(conn)
		for i, body := range []string{"first", "third"} {
			req, err := http.ReadRequest(r)
			if err != nil {
				served <- fmt.Errorf("request %d: %w", i, err)
				return
			}
			req.Body.Close()
			out := answer(body)
			if i == 0 {
				out += answer("second") // unasked
			}
			if _, err := io.WriteString(conn, out); err != nil {
				served <- err
				return
			}
		}
		served <- nil
	}()
	dial := func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, ln.Addr().String())
	}
	c := newHealthzClient(dial, time.Second)
	defer c.CloseIdleConnections()
	for _, want := range []string{"first", "second", "third"} {
		a, err := c.poll(t.Context(), "10.0.3.1:10256")
		if err != nil || string(a.body) != want {
			t.Fatalf("answer %q, %v; want %q", a.body, err, want)
		}
	}
	select {
	case err := <-served:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the server did not end")
	}
}

// An idle connection waits parked, its socket outside Go's net package;
// the next poll takes the same socket back (the same kube-proxy process
// answers, on one connection), and closing parked connections closes
// their sockets (the node sees each end).
func TestHealthzClientParksIdleConnections(t *testing.T) {
	var opened, closed atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(okHealthz))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			opened.Add(1)
		case http.StateClosed:
			closed.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	c := newHealthzClient(toServer(srv), time.Second)
	defer c.CloseIdleConnections()
	for round := range 3 {
		for i := range 10 {
			a, err := c.poll(t.Context(), fmt.Sprintf("10.0.4.%d:10256", i))
			if err != nil {
				t.Fatalf("round %d, node %d: %v", round, i, err)
			}
			if a.kept != (round > 0) || a.reconnected {
				t.Errorf("round %d, node %d: kept %v, reconnected %v; want kept from the second round on", round, i, a.kept, a.reconnected)
			}
		}
	}
	if n := opened.Load(); n != 10 {
		t.Errorf("%d connections accepted for 3 rounds of 10 nodes, want 10", n)
	}
	c.idle.mu.Lock()
	for addr, kc := range c.idle.idle {
		if !kc.parked() {
			t.Errorf("idle connection to %s is not parked", addr)
			continue
		}
		// The parked descriptor is the connection to the node.
		sa, err := unix.Getpeername(int(kc.fd))
		if in4, ok := sa.(*unix.SockaddrInet4); err != nil || !ok || in4.Port != srv.Listener.Addr().(*net.TCPAddr).Port {
			t.Errorf("parked descriptor of %s: peer %v, %v; want the node's listener", addr, sa, err)
		}
	}
	c.idle.mu.Unlock()
	if n := closed.Load(); n != 0 {
		t.Errorf("%d connections closed while kept, want 0", n)
	}
	c.CloseIdleConnections()
	waitFor(t, "the node saw the 10 parked connections closed", func() bool { return closed.Load() == 10 })
}

// A parked connection the node reset is replaced: the poll is sent again
// on a new connection and says so (answer.reconnected).
func TestHealthzClientParkedConnectionReset(t *testing.T) {
	srv, conns := healthzServer(t, okHealthz)
	c := newHealthzClient(toServer(srv), time.Second)
	defer c.CloseIdleConnections()
	if _, err := c.poll(t.Context(), "10.0.5.1:10256"); err != nil {
		t.Fatal(err)
	}
	srv.CloseClientConnections()
	a, err := c.poll(t.Context(), "10.0.5.1:10256")
	if err != nil {
		t.Fatalf("after the node closed the parked connection: %v", err)
	}
	if !a.reconnected || a.kept {
		t.Errorf("reconnected %v, kept %v; want an answer on a new connection, marked reconnected", a.reconnected, a.kept)
	}
	if n := conns.Load(); n != 2 {
		t.Errorf("%d connections accepted, want 2", n)
	}
}

// A poll on a parked connection waits for its answer within the request's
// deadline, keeps the connection for a late answer, and reads that answer
// to the next poll; a poll whose context ends returns then, not at its
// deadline.
func TestHealthzClientParkedWaits(t *testing.T) {
	release := make(chan struct{})
	var calls atomic.Int64
	srv, conns := healthzServer(t, func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 2 {
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}
		okHealthz(w, r)
	})
	defer close(release)
	c := newHealthzClient(toServer(srv), time.Second)
	defer c.CloseIdleConnections()
	const addr = "10.0.6.1:10256"
	if _, err := c.poll(t.Context(), addr); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 150*time.Millisecond)
	_, err := c.poll(ctx, addr)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("unanswered poll: %v, want a timeout", err)
	}
	c.idle.mu.Lock()
	kc := c.idle.idle[addr]
	c.idle.mu.Unlock()
	if kc == nil || kc.waiting == nil || !kc.parked() {
		t.Fatalf("after the timeout the connection is %+v, want it parked, waiting for the late answer", kc)
	}
	release <- struct{}{}
	a, err := c.poll(t.Context(), addr)
	if err != nil || a.sent.IsZero() || !a.kept {
		t.Fatalf("late answer: sent %v, kept %v, %v; want the timed-out request's answer on the kept connection", a.sent, a.kept, err)
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("%d connections, want 1", n)
	}
	// Shutting down: a wait on the parked socket ends with its context.
	// The third request is answered at once; the fourth waits.
	if _, err := c.poll(t.Context(), addr); err != nil {
		t.Fatal(err)
	}
	calls.Store(1)
	ctx, cancel = context.WithTimeout(t.Context(), time.Minute)
	time.AfterFunc(50*time.Millisecond, cancel)
	done := make(chan error, 1)
	go func() { _, err := c.poll(ctx, addr); done <- err }()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("poll cancelled: %v, want context.Canceled", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a cancelled poll on a parked connection did not return")
	}
}
