package harness

import (
	"sort"
	"sync"
)

// Record collects outcomes from concurrent clients. The zero value is ready
// to use.
type Record struct {
	mu  sync.Mutex
	out []Outcome
}

// Add records o.
func (r *Record) Add(o Outcome) {
	r.mu.Lock()
	r.out = append(r.out, o)
	r.mu.Unlock()
}

// Outcomes returns the outcomes so far, by send time.
func (r *Record) Outcomes() []Outcome {
	r.mu.Lock()
	out := append([]Outcome(nil), r.out...)
	r.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Sent.Before(out[j].Sent) })
	return out
}
