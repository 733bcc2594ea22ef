package supervisor

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/hapsuper/hapsuper/haproxy"
)

// Exit codes of a process that could not be started, as tini and shells use them.
const (
	ExitNotExecutable = 126
	ExitNotFound      = 127
)

// ExitError carries the code hapsuper must exit with.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string { return e.Err.Error() }
func (e *ExitError) Unwrap() error { return e.Err }

// resolve finds the HAProxy binary the way a shell would and maps failures
// to the exit codes tini uses.
func resolve(bin string) (string, error) {
	path, err := exec.LookPath(bin)
	if err == nil {
		return path, nil
	}
	switch {
	case errors.Is(err, fs.ErrPermission):
		return "", &ExitError{Code: ExitNotExecutable, Err: fmt.Errorf("haproxy binary %s is not executable: %w", bin, err)}
	default:
		return "", &ExitError{Code: ExitNotFound, Err: fmt.Errorf("haproxy binary %s not found: %w (give its path after --)", bin, err)}
	}
}

// supportsNotify reports whether the HAProxy build handles -Ws and
// NOTIFY_SOCKET, by conf's rule on its `haproxy -vv` (USE_SYSTEMD up to
// 3.0, every build from 3.1 on). It runs `haproxy -vv`, so it must run
// before the reaper starts: the reaper owns every wait after that.
func supportsNotify(ctx context.Context, path string) bool {
	out, err := haproxy.RunHAProxy(ctx, 5*time.Second, path, "-vv")
	if err != nil {
		return false
	}
	v, err := haproxy.ParseVersion(string(out))
	return err == nil && v.SupportsNotify()
}

// startMaster starts the HAProxy master in its own process group, so that a
// terminal's ^C reaches hapsuper only and hapsuper can kill every HAProxy
// process at once, with hapsuper's stdin and stdout and the given stderr. The caller reaps it: it must never be waited on here.
func startMaster(path string, argv, env []string, stderr *os.File) (int, error) {
	attr := &os.ProcAttr{
		Env:   env,
		Files: []*os.File{os.Stdin, os.Stdout, stderr},
		Sys: &syscall.SysProcAttr{
			Setpgid:   true,
			Pdeathsig: syscall.SIGTERM, // if hapsuper dies, HAProxy must not outlive it
		},
	}
	p, err := os.StartProcess(path, argv, attr)
	if err != nil {
		code := ExitNotFound
		if errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.ENOEXEC) {
			code = ExitNotExecutable
		}
		return 0, &ExitError{Code: code, Err: fmt.Errorf("start %s: %w", path, err)}
	}
	pid := p.Pid
	p.Release() // the reaper waits with wait4(-1); the os.Process must not
	return pid, nil
}

// process is the HAProxy master as the loop acts on it. The loop's tests
// replace it with a fake that records what was sent.
type process interface {
	// Signal sends sig to the master.
	Signal(sig syscall.Signal) error
	// KillGroup SIGKILLs the master's process group: every HAProxy process.
	KillGroup() error
	// Reap collects every child that exited and returns the master's exit
	// code once it is among them, and the other children's codes by pid.
	Reap() (code int, exited bool, others map[int]int)
}

// masterProcess is the process started by startMaster: its pid is also its
// process group's id.
type masterProcess struct {
	pid int
	log *slog.Logger
}

var _ process = masterProcess{}

func (m masterProcess) Signal(sig syscall.Signal) error { return syscall.Kill(m.pid, sig) }

func (m masterProcess) KillGroup() error { return killGroup(m.pid) }

// killGroup SIGKILLs the process group pgid; a group already gone is no
// error.
func killGroup(pgid int) error {
	if err := syscall.Kill(-pgid, syscall.SIGKILL); err != nil && err != syscall.ESRCH {
		return err
	}
	return nil
}

func (m masterProcess) Reap() (int, bool, map[int]int) {
	ws, done, others := reapAll(m.pid, m.log)
	if !done {
		return 0, false, others
	}
	return exitCode(ws), true, others
}

// exitCode maps a wait status to the code a shell would report.
func exitCode(ws syscall.WaitStatus) int {
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}
