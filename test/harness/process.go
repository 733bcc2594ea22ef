package harness

import (
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// Process is a started command whose stdout and stderr go, through one
// plain pipe, to its Log. A pipe, not StdoutPipe: HAProxy inherits it, and
// the wait for the command must not wait for HAProxy to close it.
type Process struct {
	Cmd *exec.Cmd
	Log

	done   chan struct{} // closed once the command was waited for
	mu     sync.Mutex
	code   int
	exitAt time.Time
}

// Start starts cmd with its output in the returned Process's Log.
func Start(cmd *exec.Cmd) (*Process, error) {
	p := &Process{Cmd: cmd, done: make(chan struct{})}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("make the output pipe of %s: %w", cmd.Path, err)
	}
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		w.Close()
		r.Close()
		return nil, fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	w.Close()
	go p.Read(r)
	go func() {
		_ = cmd.Wait() // the code says it
		p.mu.Lock()
		p.code, p.exitAt = ExitCode(cmd.ProcessState), time.Now()
		p.mu.Unlock()
		close(p.done)
	}()
	return p, nil
}

// ExitCode is a process's exit code as a shell reports it: 128+N when
// signal N killed it.
func ExitCode(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// Pid is the process's pid.
func (p *Process) Pid() int { return p.Cmd.Process.Pid }

// Done is closed once the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has exited.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Exit returns the exit code and when the process exited; valid once Done
// is closed.
func (p *Process) Exit() (int, time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.code, p.exitAt
}

// Signal sends sig to the process.
func (p *Process) Signal(sig syscall.Signal) error {
	if err := p.Cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("send %v to pid %d: %w", sig, p.Pid(), err)
	}
	return nil
}

// Kill SIGKILLs the process unless it has exited, and waits at most 5 s for
// it; it reports whether it is gone.
func (p *Process) Kill() bool {
	if p.Exited() {
		return true
	}
	_ = p.Cmd.Process.Kill()
	select {
	case <-p.done:
		return true
	case <-time.After(5 * time.Second):
		return false
	}
}
