package metrics

import (
	"context"
	"net"
	"net/http"
	"sync"
	"time"
)

// connLimit holds at most n connections open at once, like
// netutil.LimitListener, but connections that are not being answered
// cannot deny a new client: when every slot is taken and a connection
// waits, the connection that has waited the longest without a request
// being answered on it is closed to make room. Such a connection is idle
// between keep-alive requests (a Prometheus that kept it reconnects at its
// next scrape), silent since it connected, or still sending its request
// header (a slowloris). Only connections whose request is in the handler
// keep a waiting one out; a rendering takes milliseconds and the write
// timeout bounds it. (Sixteen silent connections from one client used to
// hold every slot until the read-header timeout: each scrape waited 5 s.)
type connLimit struct {
	net.Listener
	slots chan struct{}
	wake  chan struct{} // a connection has started to wait: Accept may close it

	mu      sync.Mutex
	waiting map[net.Conn]time.Time // since when, for connections that hold a slot and are not in the handler
	held    map[net.Conn]bool      // connections that hold a slot
}

func newConnLimit(ln net.Listener, n int) *connLimit {
	return &connLimit{Listener: ln, slots: make(chan struct{}, n), wake: make(chan struct{}, 1), waiting: map[net.Conn]time.Time{}, held: map[net.Conn]bool{}}
}

// evictWait is how long Accept waits for a closed connection's slot before
// it closes the next waiting one.
const evictWait = 50 * time.Millisecond

// Accept accepts a connection and then takes a slot for it, closing
// waiting connections while none is free.
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
		if !l.evictLongestWaiting() {
			select { // every slot is in the handler: wait for one, or for one to wait
			case l.slots <- struct{}{}:
				return l.hold(c), nil
			case <-l.wake:
				continue
			}
		}
		select {
		case l.slots <- struct{}{}:
			return l.hold(c), nil
		case <-time.After(evictWait):
		}
	}
}

// hold records that c holds the slot just taken, waiting for its request.
func (l *connLimit) hold(c net.Conn) net.Conn {
	l.mu.Lock()
	l.held[c] = true
	l.waiting[c] = time.Now()
	l.mu.Unlock()
	return c
}

// evictLongestWaiting closes the connection that has waited the longest;
// false when every connection is in the handler.
func (l *connLimit) evictLongestWaiting() bool {
	l.mu.Lock()
	var longest net.Conn
	var since time.Time
	for c, t := range l.waiting {
		if longest == nil || t.Before(since) {
			longest, since = c, t
		}
	}
	delete(l.waiting, longest)
	l.mu.Unlock()
	if longest == nil {
		return false
	}
	longest.Close() // the server sees it closed and reports StateClosed
	return true
}

// connState is the server's ConnState hook: a connection waits again once
// its reply is written, and a closed connection gives its slot back.
func (l *connLimit) connState(c net.Conn, s http.ConnState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch s {
	case http.StateIdle:
		l.waiting[c] = time.Now()
		select {
		case l.wake <- struct{}{}:
		default: // Accept has one to look at already
		}
	case http.StateClosed, http.StateHijacked:
		delete(l.waiting, c)
		if l.held[c] {
			delete(l.held, c)
			<-l.slots
		}
	}
}

// connKey is the context key of the connection a request came on.
type connKey struct{}

// connContext is the server's ConnContext hook: it lets answering find the
// request's connection.
func (l *connLimit) connContext(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, c)
}

// answering wraps h: while a request is in h its connection does not wait,
// so it is not closed for a new one.
func (l *connLimit) answering(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c, ok := r.Context().Value(connKey{}).(net.Conn); ok {
			l.mu.Lock()
			delete(l.waiting, c)
			l.mu.Unlock()
		}
		h.ServeHTTP(w, r)
	})
}
