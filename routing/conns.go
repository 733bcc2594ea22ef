package routing

import (
	"context"
	"errors"
	"net"
	"sync"
	"syscall"
)

// connSet tracks the open healthz connections per address, kept or in
// use, so that every connection to a confirmed node is closed, whatever
// holds it. An address's connections (one or two) are a list through
// them: a map per address, kept for thousands of nodes at once, cost more
// than the connection's own state.
type connSet struct {
	mu     sync.Mutex
	byAddr map[string]*trackedConn // the first of each address's list
}

// track wraps dial so that every connection it opens is in the set until
// it is closed.
func (s *connSet) track(dial dialFunc) dialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return s.add(addr, c), nil
	}
}

// add puts c, a connection dialed to addr, in the set until it is
// closed. A connection parked between two polls leaves the set (its
// net.Conn is closed); the healthz client's idle list holds it, and its
// closeIdle closes it.
func (s *connSet) add(addr string, c net.Conn) net.Conn {
	tc := &trackedConn{Conn: c, set: s, addr: addr, inSet: true}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byAddr == nil {
		s.byAddr = map[string]*trackedConn{}
	}
	if next := s.byAddr[addr]; next != nil {
		tc.next, next.prev = next, tc
	}
	s.byAddr[addr] = tc
	return tc
}

// close closes every connection open to addr; the transport drops them.
func (s *connSet) close(addr string) {
	s.mu.Lock()
	first := s.byAddr[addr]
	delete(s.byAddr, addr)
	for c := first; c != nil; c = c.next {
		c.inSet = false // its holder's Close leaves the list alone
	}
	s.mu.Unlock()
	for c := first; c != nil; c = c.next {
		c.Conn.Close()
	}
}

// open counts the connections open to addr.
func (s *connSet) open(addr string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for c := s.byAddr[addr]; c != nil; c = c.next {
		n++
	}
	return n
}

func (s *connSet) forget(c *trackedConn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !c.inSet {
		return
	}
	c.inSet = false
	switch {
	case c.prev != nil:
		c.prev.next = c.next
	case c.next != nil:
		s.byAddr[c.addr] = c.next
	default:
		delete(s.byAddr, c.addr)
	}
	if c.next != nil {
		c.next.prev = c.prev
	}
	c.prev, c.next = nil, nil
}

// trackedConn leaves its set when closed.
type trackedConn struct {
	net.Conn
	set  *connSet
	addr string
	// inSet: in its address's list, linked by prev and next; all three
	// under set.mu.
	inSet      bool
	prev, next *trackedConn
}

// SyscallConn is the socket's, so that a kept connection can be parked.
func (c *trackedConn) SyscallConn() (syscall.RawConn, error) {
	sc, ok := c.Conn.(syscall.Conn)
	if !ok {
		return nil, errors.ErrUnsupported
	}
	return sc.SyscallConn()
}

func (c *trackedConn) Close() error {
	c.set.forget(c)
	return c.Conn.Close()
}
