package runtimeapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"
)

// DefaultTimeout bounds a call when Client.Timeout is not positive.
const DefaultTimeout = 5 * time.Second

// MaxReplySize bounds the bytes read for one command line (4 MiB). A larger
// reply is an error wrapping ErrReplyTooLarge.
const MaxReplySize = 4 << 20

var (
	// ErrPartialReply is wrapped by errors for replies that ended (connection
	// closed, deadline, cancellation) before every expected output was complete.
	ErrPartialReply = errors.New("partial reply")
	// ErrReplyTooLarge is wrapped by errors for replies larger than MaxReplySize.
	ErrReplyTooLarge = errors.New("reply larger than the 4 MiB limit")
	// ErrNoSuchProcess is wrapped when the master knows no process with the
	// target pid: the worker exited (an old worker finished) or never existed.
	ErrNoSuchProcess = errors.New("no such process")
	// ErrWorkerUnreachable is wrapped when the master could not talk to the
	// target worker ("Can't connect to the target CLI!"): seen on 2.6 when an
	// old worker is exiting; also the master's answer to a worker that hangs.
	ErrWorkerUnreachable = errors.New("worker unreachable")
	// ErrCLI is wrapped by errors that are an error answer of the master or a
	// worker, such as "Unknown command" or "No such proxy.", or output the
	// parser does not recognise (its first line is quoted).
	ErrCLI = errors.New("error answer from HAProxy")
)

// Client talks to the master CLI socket. Every call opens one connection,
// sends one command line and reads until the master closes, within Timeout
// (DefaultTimeout if not positive) and the context's deadline. The zero value
// needs only Socket; a Client is safe for concurrent use.
type Client struct {
	Socket  string
	Timeout time.Duration
}

// New returns a client of the master socket at path; timeout bounds each call.
func New(path string, timeout time.Duration) *Client { return &Client{Socket: path, Timeout: timeout} }

// roundTrip sends one command line and returns everything the master wrote
// until it closed the connection. A read cut by the deadline or by ctx is an
// error wrapping ErrPartialReply; it never returns a partial reply with a nil
// error.
func (c *Client) roundTrip(ctx context.Context, line string) (string, error) {
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	callCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	var d net.Dialer
	conn, err := d.DialContext(callCtx, "unix", c.Socket)
	if err != nil {
		return "", fmt.Errorf("connect to master CLI %s (is HAProxy running with -S on this path?): %w", c.Socket, err)
	}
	defer conn.Close()
	if deadline, ok := callCtx.Deadline(); ok {
		_ = conn.SetDeadline(deadline) // a closed conn fails the write below anyway
	}
	// Cancellation of ctx interrupts a blocked read or write at once.
	stop := context.AfterFunc(callCtx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()

	if _, err := io.WriteString(conn, line+"\n"); err != nil {
		return "", fmt.Errorf("send %q to master CLI %s: %w", line, c.Socket, cause(ctx, err))
	}
	// The master closes only once it has read the end of the input.
	if err := conn.(*net.UnixConn).CloseWrite(); err != nil {
		return "", fmt.Errorf("send %q to master CLI %s: %w", line, c.Socket, cause(ctx, err))
	}
	reply, err := io.ReadAll(io.LimitReader(conn, MaxReplySize+1))
	if len(reply) > MaxReplySize {
		return "", fmt.Errorf("read reply to %q from master CLI %s: %w (ask for fewer workers or frontends per call)", line, c.Socket, ErrReplyTooLarge)
	}
	if err != nil {
		return "", fmt.Errorf("read reply to %q from master CLI %s: %w after %d bytes: %w", line, c.Socket, ErrPartialReply, len(reply), cause(ctx, err))
	}
	return string(reply), nil
}

// cause prefers the caller's context error (cancelled, deadline) over the
// socket's timeout error it provoked. The socket can time out a moment before
// the context's own timer fires when the caller's deadline is the nearer one.
func cause(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) && errors.Is(err, os.ErrDeadlineExceeded) {
		return context.DeadlineExceeded
	}
	return err
}
