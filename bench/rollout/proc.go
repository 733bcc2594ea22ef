package main

import (
	"time"

	"github.com/hapsuper/hapsuper/test/harness"
)

// usage is a process's memory and CPU while serving.
type usage struct {
	rssKB      int64
	cpuPercent float64 // of one core, averaged since the pod turned Ready
}

// measureUsage reads pid's VmRSS and its CPU share since since, when it
// had used baseTicks.
func measureUsage(pid int, since time.Time, baseTicks int64) usage {
	u := usage{rssKB: harness.StatusKB(pid, "VmRSS")}
	if el := time.Since(since).Seconds(); el > 0 && !since.IsZero() {
		u.cpuPercent = 100 * float64(harness.CPUTicks(pid)-baseTicks) / 100 / el // USER_HZ = 100
	}
	return u
}
