package status

import "time"

// ReloadResult is what became of one reload of HAProxy.
type ReloadResult string

// The results of a reload. Checking and Reloading are the states of the
// reload under way; the others end it.
const (
	ReloadChecking  ReloadResult = "checking"  // hapsuper runs haproxy -c on the new configuration
	ReloadReloading ReloadResult = "reloading" // sent to (or seen in) the master; no outcome yet
	ReloadOK        ReloadResult = "ok"        // a new worker serves the new configuration
	ReloadRefused   ReloadResult = "refused"   // hapsuper's haproxy -c failed: no reload was sent
	ReloadFailed    ReloadResult = "failed"    // the master reloaded and no new worker came: the old one still serves
)

// ReloadResults lists the results that end a reload, in the order metrics
// and docs show them.
func ReloadResults() []ReloadResult { return []ReloadResult{ReloadOK, ReloadRefused, ReloadFailed} }

// Reloads counts the reloads since hapsuper started, by result, and shows
// the last one.
type Reloads struct {
	OK      int     `json:"ok"`
	Refused int     `json:"refused"`
	Failed  int     `json:"failed"`
	Last    *Reload `json:"last,omitempty"` // nil until the first reload
}

// Count returns the number of reloads that ended with r.
func (r Reloads) Count(res ReloadResult) int {
	switch res {
	case ReloadOK:
		return r.OK
	case ReloadRefused:
		return r.Refused
	case ReloadFailed:
		return r.Failed
	}
	return 0
}

// Reload is one reload of HAProxy.
type Reload struct {
	At     time.Time    `json:"at"`     // when it was asked (or, for one hapsuper did not send, first seen)
	Result ReloadResult `json:"result"` // ok, refused, failed, or checking/reloading while under way
	// Origin is who asked: "SIGHUP" or "SIGUSR2" to hapsuper, or "master CLI"
	// for a reload hapsuper did not send (a controller's `reload`).
	Origin string    `json:"origin"`
	Ended  time.Time `json:"ended,omitzero"`   // when the result was known
	Worker int       `json:"worker,omitempty"` // ok: the new worker's pid
	// Detail says why it was refused or failed: HAProxy's alert lines, or
	// what was seen of the workers.
	Detail string `json:"detail,omitempty"`
}
