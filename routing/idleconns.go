package routing

import (
	"sync"
	"time"
)

// idleConns keeps at most one idle connection per address, for the
// healthz and the metrics clients alike. The zero value is ready.
type idleConns[C interface {
	Close() error
	SetDeadline(time.Time) error
}] struct {
	mu   sync.Mutex
	idle map[string]C
}

// take removes and returns addr's idle connection, if any.
func (p *idleConns[C]) take(addr string) (C, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	c, ok := p.idle[addr]
	delete(p.idle, addr)
	return c, ok
}

// put keeps c as addr's idle connection, its deadline cleared; one kept
// before is closed.
func (p *idleConns[C]) put(addr string, c C) {
	c.SetDeadline(time.Time{})
	p.mu.Lock()
	if p.idle == nil {
		p.idle = map[string]C{}
	}
	old, had := p.idle[addr]
	p.idle[addr] = c
	p.mu.Unlock()
	if had {
		old.Close()
	}
}

// close closes addr's idle connection, if any: its node is not asked
// again.
func (p *idleConns[C]) close(addr string) {
	if c, ok := p.take(addr); ok {
		c.Close()
	}
}

// closeAll closes every idle connection.
func (p *idleConns[C]) closeAll() {
	p.mu.Lock()
	idle := p.idle
	p.idle = nil
	p.mu.Unlock()
	for _, c := range idle {
		c.Close()
	}
}

// len is the number of idle connections kept.
func (p *idleConns[C]) len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.idle)
}
