package supervisor

import (
	"bytes"
	"fmt"
	"os"
	"sync/atomic"
	"time"
)

// A master CLI that does not answer is HAProxy that stopped answering,
// unless HAProxy reloads: a master that re-executes refuses connections
// (every version), and a controller reloading every 200 ms on a loaded
// machine kept it refusing for 3-6 s at a time. The poller marks such a
// failed poll drain.Observation.Reloading when the master process runs
// (not stopped, not a zombie) and HAProxy was seen reloading less than
// reloadTimeout before the poll: the master's reload count moved between
// two successful polls, or HAProxy said RELOADING=1 on the notify socket.
// A master stopped, or hung longer than that after its last reload, is
// unavailable again.

// reloadSeen is when HAProxy was last seen reloading, marked by the poller
// and the loop, each from its own goroutine. The zero value has seen none;
// a nil one sees none and marks nothing.
type reloadSeen struct{ at atomic.Pointer[time.Time] }

// mark records a reload seen at at, unless a later one was.
func (r *reloadSeen) mark(at time.Time) {
	if r == nil {
		return
	}
	for {
		last := r.at.Load()
		if last != nil && !at.After(*last) {
			return
		}
		if r.at.CompareAndSwap(last, &at) {
			return
		}
	}
}

// within reports whether a reload was seen no more than d before at (or
// after it: a mark from the other goroutine may be the newer).
func (r *reloadSeen) within(at time.Time, d time.Duration) bool {
	if r == nil {
		return false
	}
	last := r.at.Load()
	return last != nil && at.Sub(*last) <= d
}

// processRunning reports whether pid is a process that runs: listed in
// /proc, and neither stopped (SIGSTOP, a tracer) nor a zombie.
func processRunning(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// "pid (comm) state ...": comm may hold any byte, ')' included.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 || i+2 >= len(stat) {
		return false
	}
	switch stat[i+2] {
	case 'T', 't', 'Z', 'X', 'x':
		return false
	}
	return true
}
