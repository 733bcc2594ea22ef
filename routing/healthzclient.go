package routing

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"syscall"
	"time"
)

// healthzClient asks kube-proxies' /healthz over HTTP/1.1 and keeps one idle
// connection per node for the next round. It is net/http's client cut to a
// poll: net/http's transport parks two goroutines on every kept-alive
// connection, whose stacks (4-8 KB each, sized by the runtime from the
// average stack) made most of the fan-out's RSS growth at a thousand nodes;
// here an idle connection is its socket, parked outside Go's net package
// (parked.go), the read buffer comes from a pool
// for the length of a request (healthzReaders), and the exchange runs on
// the caller's goroutine. Safe for concurrent use: two requests to one
// address at once take two connections, and one is kept.
type healthzClient struct {
	dial        dialFunc
	dialTimeout time.Duration
	now         func() time.Time // stamps a request left waiting (answer.sent)

	idle idleConns[*keptConn]
}

// keptConn is a connection kept for a node's next poll: thousands are
// kept at once, each as small as can be (parked.go).
type keptConn struct {
	net.Conn // nil while parked
	// fd is the socket while parked (parked.go), -1 otherwise.
	fd int32
	// answered: the connection has carried an answer: whatever answers on
	// it later is the process that answered then (a restarted kube-proxy
	// has none of its predecessor's connections).
	answered bool
	// x is the read buffer and its byte budget during an exchange; between
	// two it is nil, unless the node sent bytes past the last answer: they
	// stay with the connection, the start of what is read next.
	x *exchangeBuf
	// waiting is a request that timed out before any byte of its answer
	// came: the connection is kept for its late answer (a healthz whose
	// packets were dropped for a while, or a kube-proxy frozen, answers it
	// once it can).
	waiting *waitingRequest
}

// exchangeBuf is what an exchange reads an answer through: a buffer, and
// the byte budget between it and the connection.
type exchangeBuf struct {
	budget answerBudget
	r      *bufio.Reader
}

// waitingRequest is a request written at sent whose answer has not come.
type waitingRequest struct {
	path string
	sent time.Time
}

// answer is one healthz answer and how it came.
type answer struct {
	status int
	body   []byte
	// sent is when the request was written, by an earlier poll that timed
	// out waiting for it; zero when this poll wrote it.
	sent time.Time
	// kept: the connection had carried an answer before this one, so the
	// same process answered both.
	kept bool
	// reconnected: the node had closed the connection that answered
	// before (kube-proxy's server keeps idle connections open: its process
	// may have been restarted) and this answer came on a new one.
	reconnected bool
}

func newKeptConn(conn net.Conn) *keptConn { return &keptConn{Conn: conn, fd: -1} }

// healthzReaders are the read buffers of the exchanges in flight: kept
// per connection, thousands of idle connections held as many buffers.
var healthzReaders = sync.Pool{New: func() any {
	x := &exchangeBuf{}
	x.r = bufio.NewReaderSize(&x.budget, healthzReadBuffer)
	return x
}}

// reader is kc's read buffer for an exchange, reading from its
// connection's from within budget: the one holding bytes past the last answer,
// else one from the pool.
func (kc *keptConn) reader(from io.Reader) *exchangeBuf {
	if kc.x == nil {
		kc.x = healthzReaders.Get().(*exchangeBuf)
	}
	kc.x.budget.r = from
	return kc.x
}

// release gives kc's read buffer back to the pool at the end of an
// exchange, unless it holds bytes and kc is kept.
func (kc *keptConn) release(kept bool) {
	x := kc.x
	if x == nil {
		return
	}
	x.budget.r = nil
	if kept && x.r.Buffered() > 0 {
		return
	}
	x.r.Reset(&x.budget)
	healthzReaders.Put(x)
	kc.x = nil
}

// maxHealthzHead bounds the status line and headers of an answer
// (http.ReadResponse reads those without a limit: an endless status line
// from a listener on a node's :10256 grew the process by 600 MB within the
// request's timeout); maxHealthzAnswer bounds the rest, the body with its
// framing (chunk sizes, trailers). kube-proxy's answer is ~450 bytes.
const (
	maxHealthzHead   = 16 << 10
	maxHealthzAnswer = maxHealthzHead + maxHealthzBody
)

// errHeadTooLong: the status line and headers passed maxHealthzHead bytes;
// errAnswerTooLong: the body and its framing passed maxHealthzAnswer.
var (
	errHeadTooLong   = fmt.Errorf("status line and headers longer than %d bytes: not kube-proxy's healthz", maxHealthzHead)
	errAnswerTooLong = fmt.Errorf("answer longer than %d bytes: not kube-proxy's healthz", maxHealthzAnswer)
)

// answerBudget reads from r until left bytes were read, then fails with
// over.
type answerBudget struct {
	r    io.Reader
	left int64
	over error
}

func (b *answerBudget) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, b.over
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.r.Read(p)
	b.left -= int64(n)
	return n, err
}

// healthzReadBuffer holds an answer (~450 bytes with headers) in one read;
// a longer one is read in pieces.
const healthzReadBuffer = 512

// newHealthzClient asks over connections from dial. A connection must be
// made within dialTimeout, shorter than the request's, so that a node that
// does not accept fails as a dial error rather than as a silent kube-proxy.
func newHealthzClient(dial dialFunc, dialTimeout time.Duration) *healthzClient {
	return &healthzClient{dial: dial, dialTimeout: dialTimeout, now: time.Now}
}

// errStale: a kept connection the node had closed (it failed before any
// byte of an answer). The request is sent again on a new connection, as
// net/http does for a GET.
var errStale = errors.New("kept connection closed by the node")

// get sends GET /healthz to addr and reads the answer, within ctx. A
// failure to connect is a *dialError; a timeout is context.DeadlineExceeded.
func (c *healthzClient) get(ctx context.Context, addr string) (status int, body []byte, err error) {
	return c.getPath(ctx, addr, "/healthz")
}

// getPath is get for another path (a Service's health check asks /).
func (c *healthzClient) getPath(ctx context.Context, addr, path string) (status int, body []byte, err error) {
	a, err := c.ask(ctx, addr, path, false)
	return a.status, a.body, err
}

// poll is get for the confirmation rounds: a request that times out before
// any byte of its answer leaves its connection kept, and the next poll of
// addr reads that answer first (answer.sent, answer.kept), so that a node
// silent for a while is known, once it answers, for the same kube-proxy.
func (c *healthzClient) poll(ctx context.Context, addr string) (answer, error) {
	return c.ask(ctx, addr, "/healthz", true)
}

// ask sends path on addr's kept connection, else a new one; with wait, a
// timed-out request's connection is kept for its late answer.
func (c *healthzClient) ask(ctx context.Context, addr, path string, wait bool) (answer, error) {
	stale := false
	if kc := c.take(addr); kc != nil {
		if kc.waiting != nil && (!wait || kc.waiting.path != path) {
			kc.Close() // another caller's request is outstanding on it
		} else {
			a, err := c.exchange(ctx, kc, addr, path, true, wait)
			if !errors.Is(err, errStale) {
				return a, err
			}
			stale = kc.answered
		}
	}
	dctx, cancel := context.WithTimeout(ctx, c.dialTimeout)
	conn, err := c.dial(dctx, "tcp", addr)
	cancel()
	if err != nil {
		return answer{}, &dialError{err: err}
	}
	a, err := c.exchange(ctx, newKeptConn(conn), addr, path, false, wait)
	a.reconnected = stale
	return a, err
}

// exchange makes one request on kc, or reads the answer to the one waiting
// on it, and keeps kc for the next one when the answer allows it (or, with
// wait, when the request timed out before any byte came); it closes kc
// otherwise.
func (c *healthzClient) exchange(ctx context.Context, kc *keptConn, addr, path string, reused, wait bool) (answer, error) {
	keep := false
	defer func() {
		kc.release(keep) // before another exchange can take kc
		if keep {
			c.put(addr, kc)
		} else {
			kc.Close()
		}
	}()
	rw, done := kc.open(ctx)
	defer done()
	x := kc.reader(rw)
	br := x.r
	a := answer{kept: kc.answered}
	var sent time.Time // when the request whose answer is read was written
	x.budget.left, x.budget.over = maxHealthzHead, errHeadTooLong
	if kc.waiting != nil {
		sent, kc.waiting = kc.waiting.sent, nil // its answer is the next on the wire
		a.sent = sent
	} else {
		sent = c.now()
		if _, err := io.WriteString(rw, "GET "+path+" HTTP/1.1\r\nHost: "+addr+"\r\nUser-Agent: hapsuper\r\n\r\n"); err != nil {
			return answer{}, c.failed(ctx, addr, err, reused)
		}
	}
	if _, err := br.Peek(1); err != nil {
		err = c.failed(ctx, addr, err, reused)
		if wait && errors.Is(err, context.DeadlineExceeded) && br.Buffered() == 0 {
			// Nothing of the answer came: it may still come, on this
			// connection, to the next poll.
			kc.waiting, keep = &waitingRequest{path: path, sent: sent}, true
		}
		return answer{}, err
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return answer{}, c.failed(ctx, addr, err, false)
	}
	// The head was read (with at most a buffer of the body): the body
	// and its framing get the rest.
	x.budget.left, x.budget.over = maxHealthzAnswer, errAnswerTooLong
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxHealthzBody))
	resp.Body.Close()
	if err != nil {
		return answer{}, c.failed(ctx, addr, err, false)
	}
	// Kept only when the answer was read to its end and the node keeps the
	// connection open.
	keep = !resp.Close && len(body) < maxHealthzBody
	kc.answered = true
	a.status, a.body = resp.StatusCode, body
	return a, nil
}

// failed names a failure on an open connection: a timeout as
// context.DeadlineExceeded, the end of a kept connection before any byte
// of an answer as errStale; any other with its text clipped (net/http's
// quote the node's whole status or header line).
func (c *healthzClient) failed(ctx context.Context, addr string, err error, reused bool) error {
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case errors.Is(err, os.ErrDeadlineExceeded):
		return context.DeadlineExceeded
	case reused && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, net.ErrClosed)):
		return errStale
	}
	return fmt.Errorf("GET http://%s: %w", addr, clipError(err))
}

func (c *healthzClient) take(addr string) *keptConn {
	kc, _ := c.idle.take(addr)
	return kc
}

// put keeps kc, parked, for addr's next request.
func (c *healthzClient) put(addr string, kc *keptConn) {
	kc.park()
	c.idle.put(addr, kc)
}

// closeIdle closes addr's idle connection, if any: its node is not asked
// again.
func (c *healthzClient) closeIdle(addr string) { c.idle.close(addr) }

// CloseIdleConnections closes every idle connection.
func (c *healthzClient) CloseIdleConnections() { c.idle.closeAll() }
