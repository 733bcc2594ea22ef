package supervisor

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/hapsuper/hapsuper/status"
)

// The companion's states (status.CompanionStates).
const (
	companionWaiting  = "waiting"  // for HAProxy to be ready
	companionRunning  = "running"  // started, not yet exited
	companionBackoff  = "backoff"  // exited 0 or by a signal: started again at next
	companionStopping = "stopping" // SIGTERM sent to its group, not yet reaped
	companionStopped  = "stopped"  // stopped by hapsuper (drain, HAProxy gone)
	companionFailed   = "failed"   // exited with another code: the container stops
)

// companion is the program --companion runs beside HAProxy (an ingress
// controller that writes HAProxy's configuration and reloads it). The loop
// owns it and drives it with its clock: it starts it once HAProxy is ready,
// hands it the exits the one reaper collected, and stops it right before
// the soft stop. It never waits on the process itself.
type companion struct {
	path      string
	argv      []string
	env       []string
	out       *os.File // its stdout and stderr
	killDelay time.Duration
	backoff   backoff
	log       *slog.Logger

	// start and signal are the process, replaced in tests.
	start  func(path string, argv, env []string, out *os.File) (int, error)
	signal func(pgid int, sig syscall.Signal) error

	state     string
	pid       int // also its process group's id; 0 when none runs
	starts    int
	startedAt time.Time
	next      time.Time // backoff: the next start
	stopAt    time.Time // stopping: when SIGTERM was sent
	killed    bool      // stopping: SIGKILL sent
	lastExit  *int
	exitAt    time.Time
}

func newCompanion(path string, args, env []string, out *os.File, killDelay, initial, maxDelay time.Duration, log *slog.Logger) *companion {
	return &companion{
		path: path, argv: append([]string{path}, args...), env: env, out: out,
		killDelay: killDelay, backoff: backoff{initial: initial, max: maxDelay},
		log: log.With("process", "companion"), start: startCompanion, signal: signalGroup,
		state: companionWaiting,
	}
}

// resolveCompanion finds the companion's program before HAProxy starts, so
// that a wrong path fails the container at once with the code a shell
// gives.
func resolveCompanion(bin string) (string, error) {
	path, err := exec.LookPath(bin)
	switch {
	case err == nil:
		return path, nil
	case errors.Is(err, fs.ErrPermission):
		return "", &ExitError{Code: ExitNotExecutable, Err: fmt.Errorf("companion %s is not executable: %w", bin, err)}
	}
	return "", &ExitError{Code: ExitNotFound, Err: fmt.Errorf("companion %s not found: %w (give its path to --companion)", bin, err)}
}

// ready starts the companion the first time HAProxy is ready. A start that
// fails is a failure of the companion: its code is returned with failed.
func (c *companion) ready(now time.Time) (code int, failed bool) {
	if c.state != companionWaiting {
		return 0, false
	}
	return c.run(now)
}

func (c *companion) run(now time.Time) (int, bool) {
	pid, err := c.start(c.path, c.argv, c.env, c.out)
	if err != nil {
		code := exitCodeOf(err)
		c.log.Error("companion did not start", "path", c.path, "err", err, "code", code)
		c.state, c.lastExit, c.exitAt = companionFailed, &code, now
		return code, true
	}
	c.pid, c.state, c.startedAt, c.next = pid, companionRunning, now, time.Time{}
	c.starts++
	c.log.Info("companion started", "pid", pid, "argv", c.argv, "restarts", c.starts-1)
	return 0, false
}

// tick starts the companion again once its backoff is over, and SIGKILLs
// its group once the kill delay after the SIGTERM has passed.
func (c *companion) tick(now time.Time) (code int, failed bool) {
	switch c.state {
	case companionBackoff:
		if !now.Before(c.next) {
			return c.run(now)
		}
	case companionStopping:
		if !c.killed && now.Sub(c.stopAt) >= c.killDelay {
			c.killed = true
			c.log.Warn("companion did not exit within its kill delay: killing its process group", "pid", c.pid, "kill_delay", c.killDelay.String())
			if err := c.signal(c.pid, syscall.SIGKILL); err != nil {
				c.log.Warn("kill companion process group failed", "pgid", c.pid, "err", err)
			}
		}
	}
	return 0, false
}

// exited takes the companion's exit code (as exitCode reports it) and
// returns true when it failed: exits 0 and by a signal (128+n, as a shell
// reports them) start it again after a backoff, as gopherd's exit-code-map
// for the controllers does, any other code stops the container.
func (c *companion) exited(code int, now time.Time) (failed bool) {
	ran := now.Sub(c.startedAt)
	c.pid, c.lastExit, c.exitAt = 0, &code, now
	switch {
	case c.state == companionStopping:
		c.state = companionStopped
		c.log.Info("companion stopped", "code", code, "after", now.Sub(c.stopAt).Round(time.Millisecond).String())
		return false
	case code == 0 || (code > 128 && code < 128+65):
		delay := c.backoff.next(ran)
		c.state, c.next = companionBackoff, now.Add(delay)
		c.log.Warn("companion exited: starting it again", "code", code, "ran", ran.Round(time.Millisecond).String(), "in", delay.String())
		return false
	}
	c.state = companionFailed
	c.log.Error("companion failed: stopping the container", "code", code, "ran", ran.Round(time.Millisecond).String())
	return true
}

// stop ends the companion for good: SIGTERM to its process group when it
// runs (tick sends SIGKILL after the kill delay), no further start
// otherwise. It returns whether the companion still has to be reaped.
func (c *companion) stop(now time.Time, why string) bool {
	switch c.state {
	case companionRunning:
		c.state, c.stopAt = companionStopping, now
		c.log.Info("stopping the companion", "pid", c.pid, "why", why, "kill_delay", c.killDelay.String())
		if err := c.signal(c.pid, syscall.SIGTERM); err != nil {
			c.log.Warn("SIGTERM to the companion's process group failed", "pgid", c.pid, "err", err)
		}
		return true
	case companionStopping:
		return true
	case companionWaiting, companionBackoff:
		c.state = companionStopped
	}
	return false
}

// alive is true while a companion process exists: running or stopping.
func (c *companion) alive() bool {
	return c.state == companionRunning || c.state == companionStopping
}

func (c *companion) status() *status.Companion {
	st := &status.Companion{Path: c.path, State: c.state, PID: c.pid, Restarts: max(c.starts-1, 0), LastExitAt: c.exitAt, NextStart: c.next}
	if c.lastExit != nil {
		code := *c.lastExit
		st.LastExit = &code
	}
	return st
}

// backoff is the companion's restart delay: initial after its first exit
// or after a run of at least max, doubled (up to max) after each run
// shorter than that.
type backoff struct {
	initial, max time.Duration
	cur          time.Duration // the last delay; 0 before the first
}

func (b *backoff) next(ran time.Duration) time.Duration {
	if b.cur == 0 || ran >= b.max {
		b.cur = b.initial
	} else {
		b.cur = min(2*b.cur, b.max)
	}
	return b.cur
}

// startCompanion starts the companion in its own process group with its
// output on out. The reaper waits for it: never here.
func startCompanion(path string, argv, env []string, out *os.File) (int, error) {
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		return 0, err
	}
	defer devnull.Close()
	p, err := os.StartProcess(path, argv, &os.ProcAttr{
		Env:   env,
		Files: []*os.File{devnull, out, out},
		Sys: &syscall.SysProcAttr{
			Setpgid:   true,
			Pdeathsig: syscall.SIGKILL, // it must not outlive hapsuper
		},
	})
	if err != nil {
		code := ExitNotFound
		if errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.ENOEXEC) {
			code = ExitNotExecutable
		}
		return 0, &ExitError{Code: code, Err: fmt.Errorf("start companion %s: %w", path, err)}
	}
	pid := p.Pid
	p.Release()
	return pid, nil
}

// signalGroup sends sig to the process group pgid; a group already gone
// is no error.
func signalGroup(pgid int, sig syscall.Signal) error {
	if err := syscall.Kill(-pgid, sig); err != nil && err != syscall.ESRCH {
		return err
	}
	return nil
}
