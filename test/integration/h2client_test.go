package integration

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"sync"
	"time"

	"golang.org/x/net/http2"
)

// h2Client speaks HTTP/2 over clear text (h2c, prior knowledge) and watches
// every frame the server sends for GOAWAY.
type h2Client struct {
	addr string
	tr   *http2.Transport
	rec  *recorder

	mu    sync.Mutex
	conns []*h2Conn
}

// h2Conn is one TCP connection of the client, with the GOAWAY it received.
type h2Conn struct {
	net.Conn
	id int

	mu     sync.Mutex
	buf    []byte // server bytes not yet split into frames
	goAway time.Time
}

func newH2Client(addr string) *h2Client {
	c := &h2Client{addr: addr, rec: newRecorder("h2c")}
	c.tr = &http2.Transport{
		AllowHTTP: true,
		DialTLSContext: func(ctx context.Context, network, addr string, _ *tls.Config) (net.Conn, error) {
			var d net.Dialer
			raw, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			c.mu.Lock()
			defer c.mu.Unlock()
			hc := &h2Conn{Conn: raw, id: len(c.conns) + 1}
			c.conns = append(c.conns, hc)
			return hc, nil
		},
	}
	return c
}

// Read passes the server's bytes on and splits them into frames on the way
// to note a GOAWAY.
func (h *h2Conn) Read(p []byte) (int, error) {
	n, err := h.Conn.Read(p)
	if n > 0 {
		h.scan(p[:n])
	}
	return n, err
}

// scan reads frame headers (9 bytes: length, type, flags, stream) from the
// server's byte stream.
func (h *h2Conn) scan(p []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.buf = append(h.buf, p...)
	for len(h.buf) >= 9 {
		length := int(h.buf[0])<<16 | int(h.buf[1])<<8 | int(h.buf[2])
		if len(h.buf) < 9+length {
			return
		}
		if http2.FrameType(h.buf[3]) == http2.FrameGoAway && length >= 8 && h.goAway.IsZero() {
			h.goAway = time.Now()
		}
		h.buf = h.buf[9+length:]
	}
}

// goAwayAt returns when the connection got GOAWAY (zero if it did not).
func (h *h2Conn) goAwayAt() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.goAway
}

// connections returns the connections dialled so far.
func (c *h2Client) connections() []*h2Conn {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*h2Conn(nil), c.conns...)
}

// get sends one GET on the transport's pool and records the outcome, with
// the connection that carried it.
func (c *h2Client) get(path string, timeout time.Duration) outcome {
	o := outcome{start: time.Now()}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	trace := &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) {
		if hc, ok := info.Conn.(*h2Conn); ok {
			o.conn = hc.id
		}
		o.reused = info.Reused
	}}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, trace), http.MethodGet, "http://"+c.addr+path, nil)
	if err == nil {
		var resp *http.Response
		resp, err = c.tr.RoundTrip(req)
		if err == nil {
			o.status = resp.StatusCode
			_, err = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}
	o.finish(err)
	c.rec.add(o)
	return o
}

// close drops the transport's idle connections.
func (c *h2Client) close() { c.tr.CloseIdleConnections() }
