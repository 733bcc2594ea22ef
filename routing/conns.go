package routing

import (
	"context"
	"net"
	"sync"
)

// connSet tracks the open healthz connections per address, kept or in
// use, so that every connection to a confirmed node is closed, whatever
// holds it.
type connSet struct {
	mu     sync.Mutex
	byAddr map[string]map[*trackedConn]struct{}
}

// track wraps dial so that every connection it opens is in the set until
// it is closed.
func (s *connSet) track(dial dialFunc) dialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		tc := &trackedConn{Conn: c, set: s, addr: addr}
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.byAddr == nil {
			s.byAddr = map[string]map[*trackedConn]struct{}{}
		}
		if s.byAddr[addr] == nil {
			s.byAddr[addr] = map[*trackedConn]struct{}{}
		}
		s.byAddr[addr][tc] = struct{}{}
		return tc, nil
	}
}

// close closes every connection open to addr; the transport drops them.
func (s *connSet) close(addr string) {
	s.mu.Lock()
	conns := s.byAddr[addr]
	delete(s.byAddr, addr)
	s.mu.Unlock()
	for c := range conns {
		c.Conn.Close()
	}
}

// open counts the connections open to addr.
func (s *connSet) open(addr string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.byAddr[addr])
}

func (s *connSet) forget(c *trackedConn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.byAddr[c.addr], c)
	if len(s.byAddr[c.addr]) == 0 {
		delete(s.byAddr, c.addr)
	}
}

// trackedConn leaves its set when closed.
type trackedConn struct {
	net.Conn
	set  *connSet
	addr string
}

func (c *trackedConn) Close() error {
	c.set.forget(c)
	return c.Conn.Close()
}
