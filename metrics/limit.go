package metrics

import (
	"net"
	"net/http"
	"sync"
	"time"
)

// connLimit holds at most n connections open at once, like
// netutil.LimitListener, but idle keep-alive connections cannot deny a new
// client: when every slot is taken and a connection waits, the connection
// idle the longest is closed to make room (a Prometheus that kept it
// reconnects at its next scrape). Only connections that are reading a
// request or writing a reply keep a waiting one out, and those are bounded
// by the server's timeouts.
type connLimit struct {
	net.Listener
	slots chan struct{}

	mu   sync.Mutex
	idle map[net.Conn]time.Time // since when, for connections between requests
	held map[net.Conn]bool      // connections that hold a slot
}

func newConnLimit(ln net.Listener, n int) *connLimit {
	return &connLimit{Listener: ln, slots: make(chan struct{}, n), idle: map[net.Conn]time.Time{}, held: map[net.Conn]bool{}}
}

// evictWait is how long Accept waits for a closed idle connection's slot
// before it closes the next idle one.
const evictWait = 50 * time.Millisecond

// Accept accepts a connection and then takes a slot for it, closing idle
// connections while none is free.
func (l *connLimit) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	for {
		select {
		case l.slots <- struct{}{}:
			return l.hold(c), nil
		default:
		}
		if !l.evictOldestIdle() {
			l.slots <- struct{}{} // every slot serves a request: wait for one
			return l.hold(c), nil
		}
		select {
		case l.slots <- struct{}{}:
			return l.hold(c), nil
		case <-time.After(evictWait):
		}
	}
}

// hold records that c holds the slot just taken.
func (l *connLimit) hold(c net.Conn) net.Conn {
	l.mu.Lock()
	l.held[c] = true
	l.mu.Unlock()
	return c
}

// evictOldestIdle closes the connection idle the longest; false when none is.
func (l *connLimit) evictOldestIdle() bool {
	l.mu.Lock()
	var oldest net.Conn
	var since time.Time
	for c, t := range l.idle {
		if oldest == nil || t.Before(since) {
			oldest, since = c, t
		}
	}
	delete(l.idle, oldest)
	l.mu.Unlock()
	if oldest == nil {
		return false
	}
	oldest.Close() // the server sees it closed and reports StateClosed
	return true
}

// connState is the server's ConnState hook: it tracks idle connections and
// gives a closed connection's slot back.
func (l *connLimit) connState(c net.Conn, s http.ConnState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch s {
	case http.StateIdle:
		l.idle[c] = time.Now()
	case http.StateActive:
		delete(l.idle, c)
	case http.StateClosed, http.StateHijacked:
		delete(l.idle, c)
		if l.held[c] {
			delete(l.held, c)
			<-l.slots
		}
	}
}
