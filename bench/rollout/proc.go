package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// usage is a process's memory and CPU while serving.
type usage struct {
	rssKB      int64
	cpuPercent float64 // of one core, averaged since the pod turned Ready
}

// measureUsage reads pid's VmRSS and its CPU share since since, when it
// had used baseTicks.
func measureUsage(pid int, since time.Time, baseTicks int64) usage {
	u := usage{rssKB: procStatusKB(pid, "VmRSS")}
	if el := time.Since(since).Seconds(); el > 0 && !since.IsZero() {
		u.cpuPercent = 100 * float64(cpuTicks(pid)-baseTicks) / 100 / el // USER_HZ = 100
	}
	return u
}

// procStatusKB reads one "kB" field of /proc/<pid>/status.
func procStatusKB(pid int, field string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}

// cpuTicks is pid's user + system time in clock ticks.
func cpuTicks(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return u + st
}
