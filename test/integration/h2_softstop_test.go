package integration

// What an HTTP/2 client that does not retry sees at the soft stop, and whose
// loss it is (docs/drain.md, "HTTP/2 at the soft stop"). h2load (nghttp2)
// counts as "errored" the requests it submitted while reading the bytes that
// end with HAProxy's GOAWAY: nghttp2 refuses them locally (REFUSED_STREAM,
// safe to retry by RFC 9113 §8.7) and never sends them, and h2load neither
// retries nor opens a new connection. The test runs h2load through a relay
// that reads every frame both ways and asserts what the capture in the doc
// shows: one GOAWAY per connection, last stream id 2^31-1, NO_ERROR; no
// RST_STREAM; every request sent was answered in full before the
// connection closed; and every request h2load counts as errored is one that
// never reached HAProxy.

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestH2SoftStop_UnsentStreamsAreTheClients: h2load (8 connections × 4
// streams, h2c) through a hapsuper drain that ends at the bound under its
// traffic, then the soft stop.
func TestH2SoftStop_UnsentStreamsAreTheClients(t *testing.T) {
	eachHAProxy(t, func(t *testing.T, h haproxyVersion) {
		h2load := requireH2load(t)
		cfg := newConfig(t)
		cfg.Web, cfg.TCP, cfg.Probe = 0, 0, 0
		dir := t.TempDir()
		s := startSupervisor(t, h, dir, cfg.write(t, dir), h2Budget.flags()...)
		s.waitReady(cfg.h2Addr())
		r := startH2Relay(t, cfg.h2Addr())

		// h2load runs past the drain: its requests keep the drain from being
		// quiet, so it ends at the bound (2 s) and the soft stop follows.
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, h2load, "-c", "8", "-m", "4", "-D", "5", "http://"+r.addr()+"/")
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatalf("start h2load: %v", err)
		}
		time.Sleep(time.Second)
		term := s.signal(syscall.SIGTERM)
		ended := s.waitLog("drain ended", 10*time.Second)
		soft := s.waitLog("soft stop", time.Second)
		code, exitAt := s.waitExit(10 * time.Second)
		if err := cmd.Wait(); err != nil {
			t.Fatalf("h2load: %v\n%s", err, out.String())
		}
		res, err := parseH2load(out.String())
		if err != nil {
			t.Fatal(err)
		}
		r.waitEnded(2 * time.Second)
		r.close()
		conns := r.connections()
		t.Logf("drain ended %s after SIGTERM (%s); soft stop at %s; exit %d at %s",
			ended.At.Sub(term), ended.Str("reason"), soft.At.Sub(term), code, exitAt.Sub(term))
		t.Logf("haproxy-%s h2load: %d total, %d succeeded, %d errored; on the wire: %d requests, %d answered",
			h.name, res.total, res.succeeded, res.errored, sum(conns, func(c *h2Seen) int { return len(c.requests) }),
			sum(conns, func(c *h2Seen) int { return len(c.answered) }))

		if code != 0 {
			t.Errorf("hapsuper exit code %d, want 0", code)
		}
		if len(conns) != 8 {
			t.Fatalf("h2load opened %d connections through the relay, want 8 (no new one after GOAWAY)", len(conns))
		}
		for _, c := range conns {
			c.check(t, term, soft.At)
		}
		// Every request that reached HAProxy was answered (checked per
		// connection above); the errored ones are those h2load counted but
		// never sent.
		sent := sum(conns, func(c *h2Seen) int { return len(c.requests) })
		if res.succeeded != sent || res.total-res.errored != sent {
			t.Errorf("h2load: %d total, %d succeeded, %d errored; %d requests reached HAProxy: want succeeded = total − errored = requests sent",
				res.total, res.succeeded, res.errored, sent)
		}
	})
}

// h2Budget makes the drain end at the bound (2 s after SIGTERM) while
// h2load keeps it busy.
var h2Budget = budget{grace: 4 * time.Second, margin: time.Second}

// requireH2load returns h2load's path, or skips (fails under CI=true) when
// nghttp2-client is not installed.
func requireH2load(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("h2load")
	if err != nil {
		msg := "h2load not installed (apt-get install nghttp2-client)"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return p
}

// h2loadResult is h2load's "requests:" line.
type h2loadResult struct{ total, succeeded, errored int }

var h2loadRequests = regexp.MustCompile(`requests: (\d+) total, \d+ started, \d+ done, (\d+) succeeded, \d+ failed, (\d+) errored`)

func parseH2load(out string) (h2loadResult, error) {
	m := h2loadRequests.FindStringSubmatch(out)
	if m == nil {
		return h2loadResult{}, fmt.Errorf("no requests line in h2load's output:\n%s", out)
	}
	n := func(s string) int { v, _ := strconv.Atoi(s); return v }
	return h2loadResult{total: n(m[1]), succeeded: n(m[2]), errored: n(m[3])}, nil
}

// h2Relay forwards each client connection to HAProxy and records the
// HTTP/2 frames of both directions. Its goroutines end with close.
type h2Relay struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup

	mu    sync.Mutex
	conns []*h2Seen
	open  []net.Conn
}

// h2Seen is what one connection carried.
type h2Seen struct {
	id int

	mu        sync.Mutex
	requests  map[uint32]bool // stream ids the client opened (HEADERS)
	answered  map[uint32]bool // stream ids the server ended (END_STREAM)
	afterEnd  []uint32        // server frames on a stream it had ended
	rsts      []string        // RST_STREAM frames, either way
	goAways   []h2GoAway      // the server's GOAWAY frames
	serverFIN time.Time       // when the server's FIN came (zero: none)
	clientFIN time.Time       // when the client's FIN came
}

type h2GoAway struct {
	at       time.Time
	lastID   uint32
	code     uint32
	requests int // requests the client had sent when it came
}

func startH2Relay(t *testing.T, target string) *h2Relay {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen for the HTTP/2 relay: %v", err)
	}
	r := &h2Relay{ln: ln, target: target}
	r.wg.Add(1)
	go r.accept()
	t.Cleanup(r.close)
	return r
}

func (r *h2Relay) addr() string { return r.ln.Addr().String() }

func (r *h2Relay) accept() {
	defer r.wg.Done()
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.DialTimeout("tcp", r.target, 2*time.Second)
		if err != nil {
			c.Close()
			continue
		}
		r.mu.Lock()
		seen := &h2Seen{id: len(r.conns) + 1, requests: map[uint32]bool{}, answered: map[uint32]bool{}}
		r.conns = append(r.conns, seen)
		r.open = append(r.open, c, up)
		r.mu.Unlock()
		r.wg.Add(2)
		go r.pipe(c, up, seen, true)
		go r.pipe(up, c, seen, false)
	}
}

// pipe copies from src to dst as read (one write per read, so bytes the
// server wrote together reach the client together) and records the frames.
func (r *h2Relay) pipe(dst, src net.Conn, seen *h2Seen, fromServer bool) {
	defer r.wg.Done()
	var pending []byte
	prefaceLeft := 24 // the client's connection preface precedes its frames
	if fromServer {
		prefaceLeft = 0
	}
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p := buf[:n]
			if prefaceLeft > 0 {
				k := min(prefaceLeft, len(p))
				prefaceLeft -= k
				p = p[k:]
			}
			pending = seen.scan(append(pending, p...), fromServer)
			if _, werr := dst.Write(buf[:n]); werr != nil {
				err = werr
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				seen.mu.Lock()
				if fromServer {
					seen.serverFIN = time.Now()
				} else {
					seen.clientFIN = time.Now()
				}
				seen.mu.Unlock()
			}
			if tc, ok := dst.(*net.TCPConn); ok && errors.Is(err, io.EOF) {
				_ = tc.CloseWrite()
			} else {
				dst.Close()
			}
			return
		}
	}
}

// scan records the whole frames at the start of b and returns the rest.
func (c *h2Seen) scan(b []byte, fromServer bool) []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(b) >= 9 {
		length := int(b[0])<<16 | int(b[1])<<8 | int(b[2])
		if len(b) < 9+length {
			break
		}
		typ, flags := b[3], b[4]
		stream := binary.BigEndian.Uint32(b[5:9]) & 0x7fffffff
		payload := b[9 : 9+length]
		switch {
		case typ == 0x1 && !fromServer:
			c.requests[stream] = true
		case (typ == 0x0 || typ == 0x1) && fromServer:
			if c.answered[stream] {
				c.afterEnd = append(c.afterEnd, stream)
			}
			if flags&0x1 != 0 {
				c.answered[stream] = true
			}
		case typ == 0x3 && len(payload) >= 4:
			c.rsts = append(c.rsts, fmt.Sprintf("stream %d code %d (from server: %v)", stream, binary.BigEndian.Uint32(payload), fromServer))
		case typ == 0x7 && fromServer && len(payload) >= 8:
			c.goAways = append(c.goAways, h2GoAway{at: time.Now(), lastID: binary.BigEndian.Uint32(payload) & 0x7fffffff,
				code: binary.BigEndian.Uint32(payload[4:]), requests: len(c.requests)})
		}
		b = b[9+length:]
	}
	return append([]byte(nil), b...)
}

// check asserts what the soft stop did to one connection: term is when the
// test sent SIGTERM (on its own clock: the GOAWAY must come after it), soft
// when hapsuper logged the soft stop (for the message only).
func (c *h2Seen) check(t *testing.T, term, soft time.Time) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.goAways) != 1 {
		t.Errorf("conn %d: %d GOAWAY frames from HAProxy, want 1: %+v", c.id, len(c.goAways), c.goAways)
	} else if g := c.goAways[0]; g.lastID != 1<<31-1 || g.code != 0 || g.at.Before(term) {
		t.Errorf("conn %d: GOAWAY last-stream-id %d code %d at %s after SIGTERM (soft stop logged at %s), want 2147483647 NO_ERROR after the soft stop",
			c.id, g.lastID, g.code, g.at.Sub(term), soft.Sub(term))
	}
	if len(c.rsts) > 0 {
		t.Errorf("conn %d: RST_STREAM: %v", c.id, c.rsts)
	}
	if len(c.afterEnd) > 0 {
		t.Errorf("conn %d: server frames on streams it had ended: %v", c.id, c.afterEnd)
	}
	var unanswered []uint32
	for id := range c.requests {
		if !c.answered[id] {
			unanswered = append(unanswered, id)
		}
	}
	if len(unanswered) > 0 {
		t.Errorf("conn %d: %d requests sent and not answered before the connection closed: %v", c.id, len(unanswered), unanswered)
	}
	if c.serverFIN.IsZero() || c.clientFIN.IsZero() {
		t.Errorf("conn %d: not closed by both sides (FIN) after h2load and hapsuper exited", c.id)
	}
}

// connections returns the connections relayed so far.
func (r *h2Relay) connections() []*h2Seen {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*h2Seen(nil), r.conns...)
}

// waitEnded waits, at most bound, until both sides of every relayed
// connection have closed (FIN).
func (r *h2Relay) waitEnded(bound time.Duration) {
	for end := time.Now().Add(bound); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		open := sum(r.connections(), func(c *h2Seen) int {
			if c.serverFIN.IsZero() || c.clientFIN.IsZero() {
				return 1
			}
			return 0
		})
		if open == 0 {
			return
		}
	}
}

// close stops accepting, closes every relayed connection and waits for the
// relay's goroutines.
func (r *h2Relay) close() {
	r.ln.Close()
	r.mu.Lock()
	for _, c := range r.open {
		c.Close()
	}
	r.mu.Unlock()
	r.wg.Wait()
}

func sum(conns []*h2Seen, f func(*h2Seen) int) int {
	n := 0
	for _, c := range conns {
		c.mu.Lock()
		n += f(c)
		c.mu.Unlock()
	}
	return n
}
