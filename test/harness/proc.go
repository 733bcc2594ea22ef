package harness

import (
	"fmt"
	"math/rand/v2"
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
	lo, hi := freePortRange()
	for range 200 {
		addr := "127.0.0.1:0"
		if hi > lo {
			addr = fmt.Sprintf("127.0.0.1:%d", lo+rand.IntN(hi-lo))
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			continue // taken: another
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if !freePorts.given[port] {
			freePorts.given[port] = true
			return port, nil
		}
	}
	return 0, fmt.Errorf("find a free port: 200 tries in [%d, %d) taken or already handed out (%d so far)", lo, hi, len(freePorts.given))
}

// freePortRange is where FreePort looks: below the kernel's ephemeral
// range (net.ipv4.ip_local_port_range, 32768–60999 by default), from
// 20000. A port in the ephemeral range, free when looked at, can become
// any outgoing connection's local port before its user binds it (a test's
// HAProxy failed to bind its frontend so, beside a benchmark's clients);
// below it only another listener can take it, and the pick is at random
// so that test processes running at once rarely meet. Both 0 (the
// kernel's pick) when the range is unknown or starts too low.
func freePortRange() (lo, hi int) {
	const from = 20000
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0, 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0, 0
	}
	first, err := strconv.Atoi(f[0])
	if err != nil || first <= from+1000 {
		return 0, 0
	}
	return from, first
}

// freePorts are the ports FreePort has returned.
var freePorts = struct {
	sync.Mutex
	given map[int]bool
}{given: map[int]bool{}}
