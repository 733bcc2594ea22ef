package integration

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// procInfo is what /proc/<pid>/stat and cmdline say about one process.
type procInfo struct {
	pid, ppid int
	state     byte   // R, S, Z, ...
	comm      string // executable name, as the kernel keeps it
	cmdline   string // argv joined by spaces (empty for zombies)
}

// readProc reads one process; ok is false when it is gone.
func readProc(pid int) (procInfo, bool) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return procInfo{}, false
	}
	s := string(b)
	// comm sits in parentheses and may hold spaces: split at the last ')'.
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open || end+4 > len(s) {
		return procInfo{}, false
	}
	rest := strings.Fields(s[end+2:])
	if len(rest) < 2 {
		return procInfo{}, false
	}
	ppid, _ := strconv.Atoi(rest[1])
	p := procInfo{pid: pid, ppid: ppid, state: rest[0][0], comm: s[open+1 : end]}
	if cl, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline")); err == nil {
		p.cmdline = strings.TrimSpace(strings.ReplaceAll(string(cl), "\x00", " "))
	}
	return p, true
}

// allProcs scans /proc.
func allProcs() []procInfo {
	ents, _ := os.ReadDir("/proc")
	var ps []procInfo
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if p, ok := readProc(pid); ok {
			ps = append(ps, p)
		}
	}
	return ps
}

// childrenOf returns the processes whose parent is ppid.
func childrenOf(ppid int) []procInfo {
	var res []procInfo
	for _, p := range allProcs() {
		if p.ppid == ppid {
			res = append(res, p)
		}
	}
	return res
}

// zombiesOf returns the zombie children of ppid.
func zombiesOf(ppid int) []procInfo {
	var res []procInfo
	for _, p := range childrenOf(ppid) {
		if p.state == 'Z' {
			res = append(res, p)
		}
	}
	return res
}

// procsMentioning returns the live (non-zombie) processes whose command
// line contains s; a test's temporary directory names its HAProxy
// processes, the master and the workers alike.
func procsMentioning(s string) []procInfo {
	var res []procInfo
	for _, p := range allProcs() {
		if p.state != 'Z' && p.pid != os.Getpid() && strings.Contains(p.cmdline, s) {
			res = append(res, p)
		}
	}
	return res
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	p, ok := readProc(pid)
	return ok && p.state != 'Z'
}

// waitGone waits until no live process mentions s, at most timeout, and
// returns the ones left.
func waitGone(s string, timeout time.Duration) []procInfo {
	end := time.Now().Add(timeout)
	for {
		left := procsMentioning(s)
		if len(left) == 0 || time.Now().After(end) {
			return left
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// killLeftovers SIGKILLs, by pid, the processes that mention s, so that a
// failed test leaves nothing behind.
func killLeftovers(t *testing.T, s string) {
	for _, p := range procsMentioning(s) {
		t.Logf("killing leftover process %d (%s)", p.pid, p.cmdline)
		_ = syscall.Kill(p.pid, syscall.SIGKILL)
	}
}
