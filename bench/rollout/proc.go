package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hapsuper/hapsuper/test/harness"
	"github.com/hapsuper/hapsuper/test/k8s/k8stest"
)

// execCmd is a pod's container process, started through ip netns exec,
// which execs in place: the pid is the program's own.
type execCmd struct {
	cmd *exec.Cmd
}

// startIn starts argv in pod's network namespace with env, its output
// collected into log. The process dies with the bench (parent-death signal).
func startIn(pod *k8stest.Pod, argv, env []string, log *harness.Log) (*execCmd, error) {
	cmd := pod.Command(context.Background(), argv[0], argv[1:]...)
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("make output pipe for pod %s: %w", pod.Name, err)
	}
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		w.Close()
		r.Close()
		return nil, fmt.Errorf("start %s in pod %s: %w", argv[0], pod.Name, err)
	}
	w.Close()
	go log.Read(r)
	return &execCmd{cmd: cmd}, nil
}

// wait waits for the process and returns its exit code, 128+N when killed
// by signal N.
func (c *execCmd) wait() int {
	_ = c.cmd.Wait()
	st := c.cmd.ProcessState
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return st.ExitCode()
}

func (c *execCmd) pid() int { return c.cmd.Process.Pid }

func (c *execCmd) signal(sig syscall.Signal) error {
	if err := c.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("send %v to pid %d: %w", sig, c.pid(), err)
	}
	return nil
}

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
