package harness

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// StatusKB reads one "kB" field of /proc/<pid>/status (VmRSS, RssAnon);
// 0 when it cannot.
func StatusKB(pid int, field string) int64 {
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

// CPUTicks is pid's user + system time in clock ticks (USER_HZ, 100 a
// second); 0 when it cannot be read.
func CPUTicks(pid int) int64 {
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

// FreePort returns a TCP port of 127.0.0.1 that was free a moment ago and
// that it has not returned before in this process: the kernel hands a
// released port out again, and two ports of one test (a frontend's and the
// metrics listener's) were seen to be the same.
func FreePort() (int, error) {
	freePorts.Lock()
	defer freePorts.Unlock()
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, fmt.Errorf("find a free port: %w", err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if !freePorts.given[port] {
			freePorts.given[port] = true
			return port, nil
		}
	}
	return 0, fmt.Errorf("find a free port: the kernel offered 100 ports already handed out (%d so far)", len(freePorts.given))
}

// freePorts are the ports FreePort has returned.
var freePorts = struct {
	sync.Mutex
	given map[int]bool
}{given: map[int]bool{}}
