package k8stest

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// Process is one long-running component (etcd, kube-apiserver,
// kube-controller-manager, kube-proxy) in its own process group, with its
// output in a log file. It is killed with the test binary (parent-death
// signal) so a crashed test leaves no component behind.
type Process struct {
	// Name says which component this is, for messages.
	Name string
	// LogPath is the file receiving the process's stdout and stderr.
	LogPath string

	cmd     *exec.Cmd
	done    chan struct{}
	err     error       // set before done closes
	stopped atomic.Bool // Stop or Kill was called: exiting is expected
}

// startProcess starts argv with its output appended to logPath and env, if
// any, added to the test's environment (later ones win).
func startProcess(name, logPath string, argv []string, env ...string) (*Process, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open log of %s: %w", name, err)
	}
	defer logFile.Close() // the child has its own descriptor
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s (%s): %w", name, argv[0], err)
	}
	p := &Process{Name: name, LogPath: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// Pid returns the process id (also its process group id).
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Exited is closed once the process has exited and been reaped.
func (p *Process) Exited() <-chan struct{} { return p.done }

// Err returns how the process ended, or nil while it runs.
func (p *Process) Err() error {
	select {
	case <-p.done:
		if p.err == nil {
			return errors.New("exited with status 0")
		}
		return p.err
	default:
		return nil
	}
}

// Crashed returns how the process ended if it exited without Stop or Kill.
func (p *Process) Crashed() error {
	if p.stopped.Load() {
		return nil
	}
	return p.Err()
}

// Freeze stops the whole process group with SIGSTOP and returns once every
// thread of the process is stopped: it keeps its sockets but answers
// nothing until Thaw.
func (p *Process) Freeze() error {
	if err := p.signal(syscall.SIGSTOP); err != nil {
		return err
	}
	return p.waitThreads(true)
}

// Thaw resumes a frozen process group with SIGCONT and returns once every
// thread runs again.
func (p *Process) Thaw() error {
	if err := p.signal(syscall.SIGCONT); err != nil {
		return err
	}
	return p.waitThreads(false)
}

// waitThreads waits (bounded) until all of the process's threads are
// stopped, or none is.
func (p *Process) waitThreads(stopped bool) error {
	deadline := time.Now().Add(2 * time.Second)
	for {
		all, err := p.threadsStopped(stopped)
		if err != nil || all {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("wait for %s (pid %d) stopped=%v: threads still not there after 2s", p.Name, p.Pid(), stopped)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// threadsStopped reports whether every thread's state is stopped (T), or
// when stopped is false, whether none is.
func (p *Process) threadsStopped(stopped bool) (bool, error) {
	dir := fmt.Sprintf("/proc/%d/task", p.Pid())
	tasks, err := os.ReadDir(dir)
	if err != nil {
		if p.Err() != nil {
			return true, nil // exited: nothing to wait for
		}
		return false, fmt.Errorf("list threads of %s: %w", p.Name, err)
	}
	for _, task := range tasks {
		stat, err := os.ReadFile(filepath.Join(dir, task.Name(), "stat"))
		if err != nil {
			continue // thread gone
		}
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 || i+2 >= len(stat) {
			continue
		}
		if (stat[i+2] == 'T') != stopped {
			return false, nil
		}
	}
	return true, nil
}

// Stop sends SIGTERM (and SIGCONT, in case it is frozen) to the process
// group, and SIGKILL when it has not exited within grace.
func (p *Process) Stop(grace time.Duration) error {
	p.stopped.Store(true)
	if err := p.signal(syscall.SIGTERM); err != nil {
		return err
	}
	_ = p.signal(syscall.SIGCONT)
	select {
	case <-p.done:
		return nil
	case <-time.After(grace):
	}
	return p.Kill()
}

// Kill sends SIGKILL to the process group and waits (bounded) for the
// process to be reaped.
func (p *Process) Kill() error {
	p.stopped.Store(true)
	if err := p.signal(syscall.SIGKILL); err != nil {
		return err
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("kill %s (pid %d): still not reaped after 10s", p.Name, p.Pid())
	}
}

func (p *Process) signal(sig syscall.Signal) error {
	select {
	case <-p.done:
		return nil // nothing left to signal
	default:
	}
	if err := syscall.Kill(-p.Pid(), sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("send %v to %s (pgid %d): %w", sig, p.Name, p.Pid(), err)
	}
	return nil
}

// LogTail returns the last n lines of the process's log.
func (p *Process) LogTail(n int) string {
	data, err := os.ReadFile(p.LogPath)
	if err != nil {
		return fmt.Sprintf("(read %s: %v)", p.LogPath, err)
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
