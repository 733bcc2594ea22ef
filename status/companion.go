package status

import (
	"fmt"
	"time"
)

// Companion is the process hapsuper runs beside HAProxy (--companion), as
// last published; absent from the snapshot without one.
type Companion struct {
	Path  string `json:"path"`
	State string `json:"state"` // waiting, running, backoff, stopping, stopped or failed
	PID   int    `json:"pid,omitempty"`
	// Restarts: starts after the first.
	Restarts int `json:"restarts"`
	// LastExit is the last exit's code as a shell reports it (128+n: killed
	// by signal n); nil until it first exited.
	LastExit   *int      `json:"lastExit,omitempty"`
	LastExitAt time.Time `json:"lastExitAt,omitzero"`
	NextStart  time.Time `json:"nextStart,omitzero"` // backoff: when it starts again
	// Failing says why the companion is failing (it exits again and again
	// after short runs, or exited with a code that stops the container);
	// Output is then its last output lines, oldest first.
	Failing string   `json:"failing,omitempty"`
	Output  []string `json:"output,omitempty"`
}

// CompanionStates lists the companion's states, for metrics and docs.
func CompanionStates() []string {
	return []string{"waiting", "running", "backoff", "stopping", "stopped", "failed"}
}

// companionLine is the companion as Render shows it: "running, pid 12, 2
// restarts, last exit 137 5s ago".
func companionLine(c Companion, now time.Time) string {
	line := c.State
	if c.PID != 0 {
		line += fmt.Sprintf(", pid %d", c.PID)
	}
	line += fmt.Sprintf(", %d restarts", c.Restarts)
	if c.LastExit != nil {
		line += fmt.Sprintf(", last exit %d %s", *c.LastExit, ago(now, c.LastExitAt))
	}
	if !c.NextStart.IsZero() && c.State == "backoff" {
		line += ", starts again " + until(now, c.NextStart)
	}
	return line
}
