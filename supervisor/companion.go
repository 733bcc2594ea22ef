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
//
// The companion is gone only when its whole tree is (companionTree): what
// it started is SIGKILLed at once when it exits, and it is started again
// only once that is reaped; its stop sends SIGTERM to the tree, SIGKILL
// after the kill delay.
type companion struct {
	path      string
	argv      []string
	env       []string
	out       *os.File // its stdout and stderr
	killDelay time.Duration
	backoff   backoff
	log       *slog.Logger

	// start is the process, replaced in tests; tree holds it and all it
	// starts, set by the loop before the first start (a fake in tests).
	start func(path string, argv, env []string, out *os.File, sys *syscall.SysProcAttr) (int, error)
	tree  companionTree

	state     string
	pid       int // the companion itself; 0 when it does not run
	starts    int
	startedAt time.Time
	next      time.Time // backoff: the next start
	stopAt    time.Time // stopping: when SIGTERM was sent
	killed    bool      // stopping: SIGKILL sent
	lastExit  *int
	exitAt    time.Time

	// The tree's processes left once the companion exited or was told to
	// stop (left, as last read), until none is; clearing: since when.
	clearing time.Time
	left     []int
	followed time.Time // running: when the tree was last read (procTree learns it)

	// quick counts its exits in a row after runs shorter than the
	// backoff's maximum, the last after lastRan: it is failing.
	quick   int
	lastRan time.Duration
	tail    *lineTail // its last output lines; nil without a relay
}

func newCompanion(path string, args, env []string, out *os.File, killDelay, initial, maxDelay time.Duration, log *slog.Logger) *companion {
	return &companion{
		path: path, argv: append([]string{path}, args...), env: env, out: out,
		killDelay: killDelay, backoff: backoff{initial: initial, max: maxDelay},
		log: log.With("process", "companion"), start: startCompanion,
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
	sys := &syscall.SysProcAttr{
		Setpgid:   true,
		Pdeathsig: syscall.SIGKILL, // it must not outlive hapsuper
	}
	c.tree.prepare(sys)
	pid, err := c.start(c.path, c.argv, c.env, c.out, sys)
	if cg, ok := c.tree.(*cgroupTree); ok && err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, fs.ErrPermission) && !errors.Is(err, syscall.ENOEXEC) {
		// The kernel refused the cgroup (no clone3 into one): follow the
		// tree in /proc from now on.
		c.log.Warn("companion not started into its cgroup: following its processes in /proc instead", "err", err)
		if err := cg.close(); err != nil {
			c.log.Warn("companion's cgroup not removed", "err", err)
		}
		c.tree = newProcTree(procRoot, os.Getpid(), cg.other)
		sys.UseCgroupFD, sys.CgroupFD = false, 0
		pid, err = c.start(c.path, c.argv, c.env, c.out, sys)
	}
	if err != nil {
		code := exitCodeOf(err)
		c.log.Error("companion did not start", "path", c.path, "err", err, "code", code)
		c.state, c.lastExit, c.exitAt = companionFailed, &code, now
		return code, true
	}
	c.tree.started(pid)
	c.pid, c.state, c.startedAt, c.next, c.followed = pid, companionRunning, now, time.Time{}, now
	c.starts++
	c.log.Info("companion started", "pid", pid, "argv", c.argv, "restarts", c.starts-1, "containment", c.tree.way())
	return 0, false
}

// companionFollow is how often a running companion's tree is read, so that
// the /proc way knows its processes before they are orphaned.
const companionFollow = time.Second

// tick starts the companion again once its backoff is over and its tree
// is empty, SIGKILLs its tree once the kill delay after the SIGTERM has
// passed, and reads what is left of a tree being cleared.
func (c *companion) tick(now time.Time) (code int, failed bool) {
	switch c.state {
	case companionRunning:
		if now.Sub(c.followed) >= companionFollow {
			c.followed = now
			if _, err := c.tree.members(); err != nil {
				c.log.Debug("companion's processes not read", "err", err)
			}
		}
	case companionStopping:
		if !c.killed && now.Sub(c.stopAt) >= c.killDelay {
			c.killed = true
			c.log.Warn("companion did not exit within its kill delay: killing its processes", "pid", c.pid, "kill_delay", c.killDelay.String())
			c.kill("the kill delay passed")
		}
	}
	c.clear(now)
	if c.state == companionStopping && c.pid == 0 && !c.clearingNow() {
		c.state = companionStopped
		c.log.Info("companion stopped", "code", *c.lastExit, "after", now.Sub(c.stopAt).Round(time.Millisecond).String())
	}
	if c.state == companionBackoff && !now.Before(c.next) {
		if !c.clearingNow() {
			return c.run(now)
		}
		if now.Sub(c.clearing) >= companionReapGrace {
			c.log.Error("companion's processes still there after SIGKILL: starting it again anyway", "pids", c.left, "count", len(c.left))
			c.clearing, c.left = time.Time{}, nil
			return c.run(now)
		}
	}
	return 0, false
}

// clearingNow reports whether processes of the tree are still waited for.
func (c *companion) clearingNow() bool { return !c.clearing.IsZero() }

// clear reads what is left of a tree being cleared, and ends the clearing
// once nothing is.
func (c *companion) clear(now time.Time) {
	if c.clearing.IsZero() {
		return
	}
	left, err := c.tree.members()
	if err != nil {
		c.log.Warn("companion's processes not read", "err", err)
		return
	}
	c.left = left
	if len(left) == 0 {
		c.log.Debug("companion's processes all reaped", "took", now.Sub(c.clearing).Round(time.Millisecond).String())
		c.clearing = time.Time{}
	}
}

// kill SIGKILLs the whole tree and logs what it reached.
func (c *companion) kill(why string) {
	pids, err := c.tree.signal(syscall.SIGKILL)
	if err != nil {
		c.log.Warn("kill the companion's processes failed", "err", err)
	}
	if len(pids) > 0 {
		c.log.Info("companion's processes killed", "why", why, "pids", pids, "count", len(pids), "containment", c.tree.way())
	}
}

// exited takes the companion's exit code (as exitCode reports it) and
// returns true when it failed: exits 0 and by a signal (128+n, as a shell
// reports them) start it again after a backoff, as gopherd's exit-code-map
// for the controllers does, any other code stops the container. Whatever
// it left running is SIGKILLed at once, unless it was being stopped (its
// kill delay then bounds the tree).
func (c *companion) exited(code int, now time.Time) (failed bool) {
	ran := now.Sub(c.startedAt)
	c.pid, c.lastExit, c.exitAt = 0, &code, now
	if c.state == companionStopping {
		c.clear(now)
		if !c.clearingNow() {
			c.state = companionStopped
			c.log.Info("companion stopped", "code", code, "after", now.Sub(c.stopAt).Round(time.Millisecond).String())
		}
		return false
	}
	c.kill("the companion exited")
	c.clearing = now
	c.clear(now)
	c.lastRan = ran
	if ran < c.backoff.max {
		c.quick++
	} else {
		c.quick = 0
	}
	switch {
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

// stop ends the companion for good: SIGTERM to its whole tree when it
// runs (tick sends SIGKILL after the kill delay), no further start
// otherwise. It returns whether the companion or a process of its tree
// still has to be reaped.
func (c *companion) stop(now time.Time, why string) bool {
	switch c.state {
	case companionRunning:
		c.state, c.stopAt, c.clearing = companionStopping, now, now
		pids, err := c.tree.members() // logged first: the log is the stop's instant
		if err != nil {
			c.log.Warn("companion's processes not read", "err", err)
		}
		c.log.Info("stopping the companion", "pid", c.pid, "why", why, "kill_delay", c.killDelay.String(), "pids", pids, "count", len(pids))
		if _, err := c.tree.signal(syscall.SIGTERM); err != nil {
			c.log.Warn("SIGTERM to the companion's processes failed", "err", err)
		}
		return true
	case companionStopping:
		return true
	case companionWaiting, companionBackoff:
		c.state, c.stopAt = companionStopped, now
	}
	return c.clearingNow()
}

// alive is true while the companion or a process of its tree exists.
func (c *companion) alive() bool {
	return c.pid != 0 || c.clearingNow()
}

// wake is when the companion next needs the loop: its next start, its
// kill delay's end, or soon while its tree is being cleared; zero when
// nothing is due.
func (c *companion) wake() time.Time {
	var at time.Time
	switch {
	case c.clearingNow():
		at = c.clearing // at once: every tick reads what is left, paced by the caller
	case c.state == companionBackoff:
		at = c.next
	}
	if c.state == companionStopping && !c.killed {
		if k := c.stopAt.Add(c.killDelay); at.IsZero() || k.Before(at) {
			at = k
		}
	}
	return at
}

func (c *companion) status(now time.Time) *status.Companion {
	st := &status.Companion{Path: c.path, State: c.state, PID: c.pid, Restarts: max(c.starts-1, 0), LastExitAt: c.exitAt, NextStart: c.next}
	if c.lastExit != nil {
		code := *c.lastExit
		st.LastExit = &code
	}
	if why := c.failing(now); why != "" {
		st.Failing, st.Output = why, c.tail.last()
	}
	return st
}

// failing says why the companion is failing: it exited with a code that
// stops the container, or it exits again and again, each time after less
// than the backoff's maximum (until a run lasts that long); "" when not.
func (c *companion) failing(now time.Time) string {
	switch {
	case c.state == companionFailed && c.lastExit != nil:
		return fmt.Sprintf("exited %d after %s: the container stops", *c.lastExit, c.lastRan.Round(time.Millisecond))
	case c.quick == 0 || c.lastExit == nil:
		return ""
	case c.state == companionBackoff, c.state == companionRunning && now.Sub(c.startedAt) < c.backoff.max:
		s := "s"
		if c.quick == 1 {
			s = ""
		}
		return fmt.Sprintf("%d quick exit%s in a row, the last %d after %s", c.quick, s, *c.lastExit, c.lastRan.Round(time.Millisecond))
	}
	return ""
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

// startCompanion starts the companion as sys says (its own process group,
// its tree) with its output on out. The reaper waits for it: never here.
func startCompanion(path string, argv, env []string, out *os.File, sys *syscall.SysProcAttr) (int, error) {
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		return 0, err
	}
	defer devnull.Close()
	p, err := os.StartProcess(path, argv, &os.ProcAttr{
		Env:   env,
		Files: []*os.File{devnull, out, out},
		Sys:   sys,
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
