package k8stest

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// Every name a harness gives to something outside its own namespaces carries
// the pid of the test process: hs-<pid>-… for network namespaces,
// hs<pid>_… for host interfaces, hapsuper-k8s-<pid>-… for temporary
// directories (which also appear in every component's command line). When
// that pid is gone, the thing is left over from a crashed run.
var (
	staleNetNS = regexp.MustCompile(`^hs-(\d+)-`)
	staleLink  = regexp.MustCompile(`^hs(\d+)_`)
	staleTemp  = regexp.MustCompile(`^hapsuper-k8s-(\d+)-`)
	staleCmd   = regexp.MustCompile(`/hapsuper-k8s-(\d+)-`)
)

var staleOnce sync.Once

// removeStale removes, once per test process, what crashed earlier runs
// left: their processes, network namespaces, host interfaces and temporary
// directories. It reports what it removed through logf.
func removeStale(logf func(format string, args ...any)) {
	staleOnce.Do(func() {
		for _, err := range removeStaleNow(logf) {
			logf("k8stest: clean up after an earlier run: %v", err)
		}
	})
}

func removeStaleNow(logf func(format string, args ...any)) []error {
	var errs []error
	procs, _ := os.ReadDir("/proc")
	for _, e := range procs {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if owner, ok := deadOwner(staleCmd, strings.ReplaceAll(string(cmdline), "\x00", " ")); ok {
			logf("k8stest: killing pid %d left by test process %d", pid, owner)
			_ = unix.Kill(pid, unix.SIGKILL)
		}
	}
	nss, _ := os.ReadDir(netnsDir)
	for _, e := range nss {
		if _, ok := deadOwner(staleNetNS, e.Name()); ok {
			logf("k8stest: deleting network namespace %s left by an earlier run", e.Name())
			if err := deleteNetNS(e.Name()); err != nil {
				errs = append(errs, err)
			}
		}
	}
	links, _ := net.Interfaces()
	for _, l := range links {
		if _, ok := deadOwner(staleLink, l.Name); ok {
			logf("k8stest: deleting interface %s left by an earlier run", l.Name)
			if err := ip("link", "delete", l.Name); err != nil {
				errs = append(errs, err)
			}
		}
	}
	temps, _ := os.ReadDir(os.TempDir())
	for _, e := range temps {
		if _, ok := deadOwner(staleTemp, e.Name()); ok {
			// A kubelet node's containers, volume and container root mounts first.
			errs = append(errs, removeStaleContainers(filepath.Join(os.TempDir(), e.Name()), logf)...)
			errs = append(errs, unmountUnder(filepath.Join(os.TempDir(), e.Name()))...)
			if err := os.RemoveAll(filepath.Join(os.TempDir(), e.Name())); err != nil {
				errs = append(errs, fmt.Errorf("remove %s: %w", e.Name(), err))
			}
		}
	}
	return errs
}

// deadOwner reports the pid named in s by re, if that process is gone.
func deadOwner(re *regexp.Regexp, s string) (int, bool) {
	m := re.FindStringSubmatch(s)
	if m == nil {
		return 0, false
	}
	pid, err := strconv.Atoi(m[1])
	if err != nil || pid == os.Getpid() {
		return 0, false
	}
	return pid, !alive(pid)
}

// alive reports whether pid is a running process (not a zombie).
func alive(pid int) bool {
	if errors.Is(unix.Kill(pid, 0), unix.ESRCH) {
		return false
	}
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	// pid (comm) state …: comm may hold spaces and parentheses.
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}
