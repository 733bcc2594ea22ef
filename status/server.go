package status

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

const (
	maxConns = 16 // concurrent status connections; more wait in the kernel backlog
	// requestTimeout bounds the wait for a request line, replyTimeout the
	// whole exchange. A client sends its line at once: a silent connection
	// holds a slot for requestTimeout only, so behind a full set of them a
	// new client is answered within about requestTimeout, well inside the
	// client's fetch timeout (cmd/hapsuper's, 5 s).
	requestTimeout = 500 * time.Millisecond
	replyTimeout   = time.Second
	maxRequestLine = 256      // bytes
	maxDiscard     = 64 << 10 // bytes read after a too long request
	acceptBackoff  = 50 * time.Millisecond

	// A watch ("watch <interval>") holds its connection and gets a snapshot
	// every interval, then, when the server closes, the snapshot of that
	// moment: the supervisor's last, with how it ended. At most maxWatchers
	// at once, so that a one-shot status request always finds a slot; the
	// final snapshot must be written within finalTimeout, which is all a
	// watcher that stopped reading can delay the exit by.
	maxWatchers      = maxConns / 2
	MinWatchInterval = 50 * time.Millisecond
	maxWatchInterval = time.Minute
	finalTimeout     = 100 * time.Millisecond
)

// Server answers status requests on a unix socket.
type Server struct {
	board *Board
	log   *slog.Logger
	ln    *net.UnixListener
	path  string

	wg      sync.WaitGroup
	sem     chan struct{}
	once    sync.Once
	closing chan struct{} // closed by Close

	mu    sync.Mutex
	conns map[*net.UnixConn]bool // being handled, for Close to cut; true: a watch or a reload

	asks chan<- ReloadAsk // reloads asked on the socket go there (reloadask.go); nil: refused
}

// Listen creates the socket at path (mode 0600, a stale file is replaced).
func Listen(path string, board *Board, log *slog.Logger) (*Server, error) {
	if err := RemoveStaleSocket(path); err != nil {
		return nil, fmt.Errorf("status socket: %w", err)
	}
	ln, err := Private(func() (*net.UnixListener, error) {
		return net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	})
	if err != nil {
		return nil, fmt.Errorf("listen on status socket %s: %w (check --status-socket and that its directory is writable)", path, err)
	}
	return &Server{board: board, log: log, ln: ln, path: path, sem: make(chan struct{}, maxConns),
		closing: make(chan struct{}), conns: map[*net.UnixConn]bool{}}, nil
}

// Private runs listen, which binds a unix socket, under the umask 0177, so
// that the socket is created with mode 0600 rather than chmodded by path
// after the bind (which would follow a symbolic link put there meanwhile).
// The umask is the process's: call it while nothing else creates files
// (at start).
func Private[T any](listen func() (T, error)) (T, error) {
	old := syscall.Umask(0o177)
	defer syscall.Umask(old)
	return listen()
}

// RemoveStaleSocket removes the unix socket a previous run left at path,
// and nothing else: a regular file, a directory or a symbolic link there
// is someone else's, and a socket that still answers is a live process's
// (another hapsuper, another HAProxy): each is an error that says so.
func RemoveStaleSocket(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("check %s: %w", path, err)
	}
	if fi.Mode().Type() != os.ModeSocket {
		return fmt.Errorf("%s exists and is not a socket (%v): hapsuper will not delete it; remove it or choose another path", path, fi.Mode().Type())
	}
	if SocketAnswers(path) {
		return fmt.Errorf("%s answers: a running process serves it (another hapsuper?): hapsuper will not remove it; stop that process or choose another path", path)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove stale socket %s: %w", path, err)
	}
	return nil
}

// answerTimeout bounds SocketAnswers' connect.
const answerTimeout = time.Second

// SocketAnswers reports whether a process may listen on the unix socket
// at path (a stream socket takes a connection, a datagram socket has a
// reader bound): a socket that answers is never stale. Only a refused
// connection (nobody bound: the kernel says so at once) or no file at
// all is an answer of no; anything else (a full backlog, a timeout) is a
// live process's.
func SocketAnswers(path string) bool {
	for _, network := range []string{"unix", "unixgram"} {
		c, err := net.DialTimeout(network, path, answerTimeout)
		switch {
		case err == nil:
			c.Close()
			return true
		case errors.Is(err, syscall.EPROTOTYPE): // a socket of the other type
			continue
		case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, os.ErrNotExist):
			return false
		}
		return true
	}
	return false
}

// Serve accepts connections until Close. It returns nil after Close, once
// every handler has returned. A slot is taken before a connection is
// accepted, so no accepted connection waits for one.
func (s *Server) Serve() error {
	for {
		select {
		case s.sem <- struct{}{}:
		case <-s.closing:
			s.wg.Wait()
			return nil
		}
		conn, err := s.ln.AcceptUnix()
		if errors.Is(err, net.ErrClosed) {
			<-s.sem
			s.wg.Wait()
			return nil
		}
		if err != nil {
			<-s.sem
			s.log.Warn("status accept failed", "err", err)
			time.Sleep(acceptBackoff) // e.g. EMFILE: do not spin
			continue
		}
		if !s.track(conn) { // Close came between: not handled
			conn.Close()
			<-s.sem
			continue
		}
		s.wg.Add(1)
		go func() {
			defer func() { s.untrack(conn); <-s.sem; s.wg.Done() }()
			s.handle(conn)
		}()
	}
}

// Close stops Serve, removes the socket file and cuts the connections
// being handled: the process must not wait on a status client to exit. A
// watch gets the snapshot of this moment first, within finalTimeout.
func (s *Server) Close() {
	s.once.Do(func() {
		s.mu.Lock()
		close(s.closing)
		for c, watching := range s.conns {
			if watching {
				c.SetDeadline(time.Now().Add(finalTimeout)) // time for the final snapshot
			} else {
				c.SetDeadline(time.Unix(1, 0))
			}
		}
		s.mu.Unlock()
		s.ln.Close() // unlinks the socket file
	})
}

// track records conn as handled; false once Close was called.
func (s *Server) track(conn *net.UnixConn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.closing:
		return false
	default:
	}
	s.conns[conn] = false // not a watch until startWatch
	return true
}

func (s *Server) untrack(conn *net.UnixConn) {
	s.mu.Lock()
	delete(s.conns, conn)
	s.mu.Unlock()
}

// setDeadline gives conn d from now, unless Close cut it (under the lock
// Close sets its deadline with).
func (s *Server) setDeadline(conn *net.UnixConn, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.closing:
	default:
		conn.SetDeadline(time.Now().Add(d))
	}
}

func (s *Server) handle(conn *net.UnixConn) {
	defer conn.Close()
	s.setDeadline(conn, requestTimeout)
	enc := json.NewEncoder(conn)
	if err := checkPeer(conn); err != nil {
		s.log.Warn("status request refused", "err", err)
		enc.Encode(Snapshot{Error: err.Error()})
		discardUnreadInput(conn) // the request is still unread
		return
	}
	line, err := bufio.NewReaderSize(conn, maxRequestLine).ReadSlice('\n')
	switch {
	case errors.Is(err, bufio.ErrBufferFull):
		enc.Encode(Snapshot{Error: "request too long: send \"status\\n\""})
		discardUnreadInput(conn)
		return
	case err != nil && !errors.Is(err, io.EOF):
		return // timed out or reset: nobody to answer
	}
	s.setDeadline(conn, replyTimeout)
	switch req := strings.TrimSpace(string(line)); {
	case req == "" || req == "status":
		enc.Encode(s.board.Load())
	case req == "watch" || strings.HasPrefix(req, "watch "):
		every, err := watchInterval(strings.TrimSpace(strings.TrimPrefix(req, "watch")))
		if err != nil {
			enc.Encode(Snapshot{Error: err.Error()})
			return
		}
		if !s.startWatch(conn) {
			enc.Encode(Snapshot{Error: fmt.Sprintf("too many watches (%d at once): try again later", maxWatchers)})
			return
		}
		s.watch(conn, enc, every)
	case req == "reload" || strings.HasPrefix(req, "reload "):
		if !s.startWatch(conn) { // it holds its connection as a watch does
			enc.Encode(ReloadReply{Error: fmt.Sprintf("too many watches and reloads (%d at once): try again later", maxWatchers)})
			return
		}
		s.askReload(conn, enc, strings.TrimSpace(strings.TrimPrefix(req, "reload")))
	default:
		enc.Encode(Snapshot{Error: fmt.Sprintf("unknown request %q: send \"status\\n\"", truncate(req, 32))})
	}
}

// watchInterval reads the interval of a watch request: a Go duration
// between MinWatchInterval and a minute, 500ms when absent.
func watchInterval(arg string) (time.Duration, error) {
	if arg == "" {
		return 500 * time.Millisecond, nil
	}
	d, err := time.ParseDuration(arg)
	if err != nil || d < MinWatchInterval || d > maxWatchInterval {
		return 0, fmt.Errorf("bad watch interval %q: send \"watch <duration>\\n\", %v to %v", truncate(arg, 32), MinWatchInterval, maxWatchInterval)
	}
	return d, nil
}

// startWatch marks conn as a watch, when fewer than maxWatchers are; a
// watch that starts after Close gets the final snapshot's time at once.
func (s *Server) startWatch(conn *net.UnixConn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, w := range s.conns {
		if w {
			n++
		}
	}
	if n >= maxWatchers {
		return false
	}
	s.conns[conn] = true
	select {
	case <-s.closing:
		conn.SetDeadline(time.Now().Add(finalTimeout))
	default:
	}
	return true
}

// watch writes a snapshot now and every interval until Close, then the
// snapshot of that moment, and returns; a write that fails (the client
// went away or stopped reading for replyTimeout) ends it.
func (s *Server) watch(conn *net.UnixConn, enc *json.Encoder, every time.Duration) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		s.setDeadline(conn, replyTimeout)
		if err := enc.Encode(s.board.Load()); err != nil {
			return
		}
		select {
		case <-s.closing:
			enc.Encode(s.board.Load()) // within the deadline Close set
			return
		case <-tick.C:
		}
	}
}

// discardUnreadInput ends the reply and reads what the peer still sends
// (bounded, within the deadline): closing a unix socket with unread input
// resets the connection, and the peer would lose the reply (or fail to send
// its request and never read the reply).
func discardUnreadInput(conn *net.UnixConn) {
	conn.CloseWrite()
	io.Copy(io.Discard, io.LimitReader(conn, maxDiscard))
}

// checkPeer refuses peers of another user: the socket is 0600, but a
// process that got hold of the file descriptor another way is still refused.
func checkPeer(conn *net.UnixConn) error {
	raw, err := conn.SyscallConn()
	if err != nil {
		return fmt.Errorf("read peer credentials: %w", err)
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return fmt.Errorf("read peer credentials: %w", err)
	}
	if credErr != nil {
		return fmt.Errorf("read peer credentials: %w", credErr)
	}
	if uid := uint32(os.Geteuid()); cred.Uid != uid && cred.Uid != 0 {
		return fmt.Errorf("peer uid %d is neither %d nor root", cred.Uid, uid)
	}
	return nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
