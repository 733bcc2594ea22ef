// Package drain is the drain state machine (STUB: to be implemented).
package drain

import "time"

// Drain is the state machine. Not safe for concurrent use: one owner feeds it.
type Drain struct{ s Settings }

// New returns a Drain in phase Starting.
func New(s Settings) *Drain { return &Drain{s: s} }

// Ready records that HAProxy answers: Starting -> Serving.
func (d *Drain) Ready(now time.Time) {}

// StopRequested starts the drain: Serving/Starting -> Draining. It returns
// false when a drain is already under way (a second request changes nothing).
func (d *Drain) StopRequested(now time.Time) bool { return true }

// SetDeadline moves the hard-stop deadline earlier (the pod's own
// deletionGracePeriodSeconds when routing/ sees it). Later deadlines are ignored.
func (d *Drain) SetDeadline(t time.Time) {}

// Observe feeds one poll of HAProxy's counters, in any phase.
func (d *Drain) Observe(o Observation) {}

// SetRouting feeds the routing condition.
func (d *Drain) SetRouting(r Routing, now time.Time) {}

// Tick advances the clock and returns the action to take now, at most once each.
func (d *Drain) Tick(now time.Time) Action { return None }

// MasterExited records that the master process is gone.
func (d *Drain) MasterExited(now time.Time) {}

// Status returns a copy of the state.
func (d *Drain) Status(now time.Time) Status { return Status{} }
