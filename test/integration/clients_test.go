package integration

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/hapsuper/hapsuper/test/harness"
)

// requestTimeout bounds one fast request: connect, send, read the reply.
const requestTimeout = 5 * time.Second

// client is a running request loop. Stopping it stops new requests; the one
// in flight finishes (each has its own deadline).
type client struct {
	rec    *recorder
	cancel context.CancelFunc
	done   chan struct{}
}

// stop ends the loop and waits for it, at most until the in-flight request's
// deadline.
func (c *client) stop() {
	c.cancel()
	select {
	case <-c.done:
	case <-time.After(maxSlow + requestTimeout):
	}
}

// wait waits, at most timeout, for the client to finish by itself; it
// reports whether it did.
func (c *client) wait(timeout time.Duration) bool {
	select {
	case <-c.done:
		return true
	case <-time.After(timeout):
		return false
	}
}

// startLoop runs step every interval until stopped or bound, and stops it
// when the test ends. step gets the context of the loop only to learn about
// stopping; requests use their own deadlines.
func startLoop(t *testing.T, name string, interval, bound time.Duration, step func(ctx context.Context, rec *recorder)) *client {
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	c := &client{rec: newRecorder(name), cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		for ctx.Err() == nil {
			next := time.Now().Add(interval)
			step(ctx, c.rec)
			select {
			case <-time.After(time.Until(next)):
			case <-ctx.Done():
			}
		}
	}()
	t.Cleanup(c.stop)
	return c
}

// http1Conn is one client HTTP/1.1 connection written by hand, so that no
// library retries or hides a failure.
type http1Conn struct {
	c      net.Conn
	br     *bufio.Reader
	id     int
	served int
}

func dialHTTP1(addr string, id int) (*http1Conn, error) {
	c, err := net.DialTimeout("tcp", addr, requestTimeout)
	if err != nil {
		return nil, err
	}
	return &http1Conn{c: c, br: bufio.NewReader(c), id: id}, nil
}

// get sends one GET and reads the whole reply; it fills every field of the
// outcome except start.
func (h *http1Conn) get(path string, close bool, timeout time.Duration) outcome {
	o := outcome{conn: h.id, reused: h.served > 0}
	h.served++
	_ = h.c.SetDeadline(time.Now().Add(timeout))
	req := "GET " + path + " HTTP/1.1\r\nHost: hapsuper.test\r\nUser-Agent: hapsuper-integration\r\n"
	if close {
		req += "Connection: close\r\n"
	}
	_, err := io.WriteString(h.c, req+"\r\n")
	if err == nil {
		var resp *http.Response
		resp, err = http.ReadResponse(h.br, nil)
		if err == nil {
			o.status, o.connClose = resp.StatusCode, resp.Close
			_, err = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}
	o.finish(err)
	return o
}

// oneShot opens a connection, sends one request with Connection: close and
// records the outcome.
func oneShot(rec *recorder, addr, path string, id int, timeout time.Duration) outcome {
	o := outcome{start: time.Now()}
	h, err := dialHTTP1(addr, id)
	if err != nil {
		o.finish(err)
	} else {
		start := o.start
		o = h.get(path, true, timeout)
		o.start = start
		h.c.Close()
	}
	rec.add(o)
	return o
}

// startContinuous opens a new connection every interval, each carrying one
// request with Connection: close.
func startContinuous(t *testing.T, addr string, interval, bound time.Duration) *client {
	n := 0
	return startLoop(t, "continuous", interval, bound, func(_ context.Context, rec *recorder) {
		n++
		oneShot(rec, addr, "/", n, requestTimeout)
	})
}

// startKeepAlive sends a request every interval on one persistent
// connection, and opens a new one only when the server closed the previous
// one (Connection: close) or a request failed.
func startKeepAlive(t *testing.T, addr string, interval, bound time.Duration) *client {
	var h *http1Conn
	n := 0
	c := startLoop(t, "keep-alive", interval, bound, func(ctx context.Context, rec *recorder) {
		start := time.Now()
		if h == nil {
			n++
			var err error
			if h, err = dialHTTP1(addr, n); err != nil {
				rec.add(failed(start, err))
				h = nil
				return
			}
		}
		o := h.get("/", false, requestTimeout)
		o.start = start
		rec.add(o)
		if o.kind != harness.KindOK || o.connClose || ctx.Err() != nil {
			h.c.Close()
			h = nil
		}
	})
	// The loop owns h; close it once the loop is done.
	go func() {
		<-c.done
		if h != nil {
			h.c.Close()
		}
	}()
	return c
}

// pausingClient sends like the continuous client for runFor, pauses for
// pauseFor, then sends again until stopped or bound.
type pausingClient struct {
	*client
	mu                   sync.Mutex
	pauseStart, pauseEnd time.Time
}

func startPausing(t *testing.T, addr string, interval, runFor, pauseFor, bound time.Duration) *pausingClient {
	p := &pausingClient{}
	begin := time.Now()
	n := 0
	p.client = startLoop(t, "pausing", interval, bound, func(ctx context.Context, rec *recorder) {
		if ps, _ := p.pauseWindow(); time.Since(begin) >= runFor && ps.IsZero() {
			p.mu.Lock()
			p.pauseStart = time.Now()
			p.mu.Unlock()
			select {
			case <-time.After(pauseFor):
			case <-ctx.Done():
				return
			}
			p.mu.Lock()
			p.pauseEnd = time.Now()
			p.mu.Unlock()
		}
		n++
		oneShot(rec, addr, "/", n, requestTimeout)
	})
	return p
}

// pauseWindow returns the pause's start and end (zero while not reached).
func (p *pausingClient) pauseWindow() (time.Time, time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pauseStart, p.pauseEnd
}

// startSlow sends one GET /slow?d=<d> on a keep-alive connection (no
// Connection: close from the client) and records its outcome.
func startSlow(t *testing.T, addr string, d time.Duration) *client {
	ctx, cancel := context.WithCancel(context.Background())
	c := &client{rec: newRecorder("slow " + d.String()), cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		start := time.Now()
		h, err := dialHTTP1(addr, 1)
		if err != nil {
			c.rec.add(failed(start, err))
			return
		}
		defer h.c.Close()
		go func() { <-ctx.Done(); h.c.Close() }()
		o := h.get("/slow?d="+d.String(), false, d+requestTimeout)
		o.start = start
		c.rec.add(o)
	}()
	t.Cleanup(c.stop)
	return c
}

// heldConn is a connection that sends nothing (more) and records when and
// how the server side ended it.
type heldConn struct {
	net.Conn
	done   chan struct{}
	closed time.Time
	err    error // what the read that saw the end returned
}

// holdTCP opens a connection to addr and reads until the peer ends it (the
// test's end closes it too).
func holdTCP(t *testing.T, addr string) *heldConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, requestTimeout)
	if err != nil {
		t.Fatalf("open a held connection to %s: %v", addr, err)
	}
	return hold(t, c)
}

// hold reads c until the peer ends it, and closes it when the test ends.
func hold(t *testing.T, c net.Conn) *heldConn {
	h := &heldConn{Conn: c, done: make(chan struct{})}
	go func() {
		defer close(h.done)
		_, h.err = io.Copy(io.Discard, c)
		h.closed = time.Now()
	}()
	t.Cleanup(func() { c.Close(); <-h.done })
	return h
}
