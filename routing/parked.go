package routing

import (
	"context"
	"io"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// A kept connection waits for the next poll parked: its socket duplicated
// out of Go's net package and the net.Conn closed, so that what a node's
// idle connection costs the process is a descriptor, not a netFD, its two
// addresses and the runtime poller's pollDesc (about 500 bytes a socket,
// half of what the baseline kept per node at 5,000 nodes). The polls after
// the first are exchanged on the parked socket itself (rawSocket): made a
// net.Conn again for each (net.FileConn), a poll cost more than twice the
// CPU of one on a kept net.Conn (46 µs against 20, BenchmarkBaselinePoll),
// in the poller's registration, two dups and the connection's addresses.
// An exchange on a parked socket is not in the observer's connSet: the
// node's poll that holds it is the only one in flight to that node, and
// the socket is parked again, or closed, when it ends.
//
// Why not a library: no HTTP client, net/http's included, asks over a
// socket it did not open itself, and what is asked is one GET of a few
// hundred bytes; the answer is still read by net/http (ReadResponse).

// park takes kc's socket out of Go's net package; a connection that is not
// a socket (a test's pipe), or whose descriptor cannot be duplicated,
// stays as it is. A parked socket is non-blocking, as Go left it.
func (kc *keptConn) park() {
	if kc.Conn == nil {
		return
	}
	sc, ok := kc.Conn.(syscall.Conn)
	if !ok {
		return
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return
	}
	fd, derr := -1, error(nil)
	if err := rc.Control(func(s uintptr) { fd, derr = unix.FcntlInt(s, unix.F_DUPFD_CLOEXEC, 0) }); err != nil || derr != nil {
		return
	}
	kc.Conn.Close()
	kc.Conn, kc.fd = nil, int32(fd)
}

// Close closes kc, parked or not.
func (kc *keptConn) Close() error {
	if kc.Conn != nil {
		return kc.Conn.Close()
	}
	if kc.fd < 0 {
		return nil
	}
	fd := kc.fd
	kc.fd = -1
	return unix.Close(int(fd))
}

// SetDeadline clears a net.Conn's deadline; a parked socket has none
// between two exchanges.
func (kc *keptConn) SetDeadline(t time.Time) error {
	if kc.Conn == nil {
		return nil
	}
	return kc.Conn.SetDeadline(t)
}

// parked says kc's socket waits outside Go's net package.
func (kc *keptConn) parked() bool { return kc.Conn == nil && kc.fd >= 0 }

// open is what an exchange on kc reads and writes, within ctx: the
// net.Conn with ctx's deadline, or the parked socket. done ends it.
func (kc *keptConn) open(ctx context.Context) (rw io.ReadWriter, done func()) {
	if kc.Conn == nil {
		dl, _ := ctx.Deadline()
		return &rawSocket{fd: int(kc.fd), ctx: ctx, deadline: dl}, func() {}
	}
	conn := kc.Conn // not kc.Conn later: kc is parked once kept
	dl, _ := ctx.Deadline()
	conn.SetDeadline(dl)
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) }) // shutting down: unblock
	return conn, func() { stop() }
}

// rawSocket reads and writes a parked socket without Go's poller: a read
// or write that would block waits in poll(2) on the calling goroutine's
// thread (the runtime gives its P to another while it waits), a slice of
// at most rawWaitSlice at a time so that ctx ending is seen, until the
// deadline. An exchange costs the writes and reads a kept net.Conn's does,
// and one poll(2) for the wait where the runtime's poller would have
// parked the goroutine: at most Concurrency threads wait so at once.
type rawSocket struct {
	fd       int
	ctx      context.Context
	deadline time.Time // zero: none but ctx
}

// rawWaitSlice bounds one poll(2): how late ctx's end is seen.
const rawWaitSlice = 100 * time.Millisecond

// wait waits until the socket has events (or an error or hang-up, which
// the read or write after it reports), the deadline passes
// (os.ErrDeadlineExceeded) or ctx ends.
func (s *rawSocket) wait(events int16) error {
	for {
		if err := s.ctx.Err(); err != nil {
			return err
		}
		slice := rawWaitSlice
		if !s.deadline.IsZero() {
			left := time.Until(s.deadline)
			if left <= 0 {
				return os.ErrDeadlineExceeded
			}
			slice = min(slice, left)
		}
		fds := []unix.PollFd{{Fd: int32(s.fd), Events: events}}
		n, err := unix.Poll(fds, int((slice+time.Millisecond-1)/time.Millisecond))
		switch {
		case err == unix.EINTR:
		case err != nil:
			return os.NewSyscallError("poll", err)
		case n > 0:
			return nil
		}
	}
}

func (s *rawSocket) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	for {
		n, err := unix.Read(s.fd, p)
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			if err := s.wait(unix.POLLIN); err != nil {
				return 0, err
			}
			continue
		case err != nil:
			return 0, os.NewSyscallError("read", err)
		case n == 0:
			return 0, io.EOF
		}
		return n, nil
	}
}

// Write writes all of p; MSG_NOSIGNAL: a node that closed the connection
// is EPIPE, not a SIGPIPE to PID 1.
func (s *rawSocket) Write(p []byte) (int, error) {
	done := 0
	for done < len(p) {
		n, err := unix.SendmsgN(s.fd, p[done:], nil, nil, unix.MSG_NOSIGNAL)
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			if err := s.wait(unix.POLLOUT); err != nil {
				return done, err
			}
			continue
		case err != nil:
			return done, os.NewSyscallError("write", err)
		}
		done += n
	}
	return done, nil
}
