package supervisor

import (
	"os"
	"syscall"
	"time"
)

// companionRecord is what the loop did about the companion.
type companionRecord struct {
	held       time.Time // the soft stop waits for the companion and its tree to be gone
	failedStop bool      // the soft stop held is the companion failure's
	failedCode int       // the companion's code when it failed: hapsuper's exit code
	failedAt   time.Time // when it failed; zero while it did not
}

// companionReapGrace bounds the wait for a SIGKILLed companion to be
// reaped before the soft stop goes out anyway.
const companionReapGrace = time.Second

// companionReapPoll is how often endCompanion reaps while it waits.
const companionReapPoll = 20 * time.Millisecond

// startCompanion starts the companion once HAProxy is ready.
//
// It waits for HAProxy's readiness and for the first successful sample of
// the master CLI, so that the companion's first reload (controllers reload
// as soon as they start) is counted and followed as a reload, not taken
// into the baseline.
func (l *loop) startCompanion() {
	if l.companion == nil || !l.ready || !l.reloads.counting() {
		return
	}
	if l.companion.tree == nil {
		l.companion.tree = openCompanionTree(os.Getpid(), l.ownChild, l.log)
	}
	now := l.now()
	if code, failed := l.companion.ready(now); failed {
		l.companionFailed(code, now)
	}
}

// reapCompanion hands the companion the exit the reaper collected.
func (l *loop) reapCompanion(others map[int]int) {
	c := l.companion
	if c == nil || c.pid == 0 {
		return
	}
	code, ok := others[c.pid]
	if !ok {
		return
	}
	delete(others, c.pid)
	if now := l.now(); c.exited(code, now) {
		l.companionFailed(code, now)
	}
}

// ownChild reports whether a child of hapsuper's (pid, in process group
// pgid) is one of its own that is not the companion's: HAProxy's processes
// (the master's group) and a reload's haproxy -c (its own group).
func (l *loop) ownChild(pid, pgid int) bool {
	if pid == l.master || pgid == l.master {
		return true
	}
	return l.check != nil && (pid == l.check.pid || pgid == l.check.pid)
}

// companionFailed soft-stops HAProxy at once, as gopherd's on-failure:
// shutdown does, once what the companion left is reaped (it was SIGKILLed
// as it exited): the pod is not being deleted, so there is no withdrawal to
// wait for. HAProxy's hard-stop-after bounds the soft stop, and
// tickCompanion hard-stops it at the stop budget; hapsuper then exits with
// the companion's code.
func (l *loop) companionFailed(code int, now time.Time) {
	l.comp.failedCode, l.comp.failedAt = code, now
	if !l.sent.soft.IsZero() {
		return
	}
	l.comp.failedStop = true
	if l.companion.alive() {
		l.comp.held = now
		return
	}
	l.sendSoftStop(now)
}

// softStop sends the drain's soft stop, once the companion is gone: it is
// stopped first (SIGTERM, SIGKILL after its kill delay), so that no reload
// of its comes after the soft stop.
func (l *loop) softStop(now time.Time) {
	if l.companion != nil && l.companion.stop(now, "the drain ended: the soft stop follows once it is gone") {
		l.comp.held = now
		return
	}
	l.sendSoftStop(now)
}

func (l *loop) sendSoftStop(now time.Time) {
	failed := l.comp.failedStop
	l.comp.held, l.comp.failedStop = time.Time{}, false
	if !l.sent.soft.IsZero() {
		return // the companion failed meanwhile: sent already
	}
	if failed {
		l.log.Error("soft stop: the companion failed", "pid", l.master, "companion_code", l.comp.failedCode)
	} else {
		l.log.Info("soft stop", "pid", l.master)
	}
	l.signalMaster(syscall.SIGUSR1)
	l.sent.soft = now
	l.softStopSent(now)
}

// tickCompanion restarts or kills the companion when its time has come,
// sends a held soft stop once it is gone (or could not be reaped in time),
// and hard-stops HAProxy a stop budget after the companion failed.
func (l *loop) tickCompanion(now time.Time) {
	c := l.companion
	if c == nil {
		return
	}
	if code, failed := c.tick(now); failed {
		l.companionFailed(code, now)
	}
	if !l.comp.held.IsZero() {
		if !c.alive() {
			l.sendSoftStop(now)
		} else if now.Sub(l.comp.held) >= c.killDelay+companionReapGrace {
			l.log.Error("the companion was not reaped after SIGKILL: soft stop anyway", "pid", c.pid, "left", c.left)
			l.sendSoftStop(now)
		}
	}
	if !l.comp.failedAt.IsZero() && l.sent.hard.IsZero() && now.Sub(l.comp.failedAt) >= l.settings.Budget() {
		l.log.Warn("hard stop", "pid", l.master, "why", "the soft stop after the companion's failure outlasted the stop budget")
		l.signalMaster(syscall.SIGTERM)
		l.sent.hard = now
	}
}

// exitCodeWith is hapsuper's exit code once HAProxy exited with code: the
// companion's when it failed.
func (l *loop) exitCodeWith(code int) int {
	if !l.comp.failedAt.IsZero() {
		return l.comp.failedCode
	}
	return code
}

// endCompanion stops the companion once HAProxy is gone, and waits, at
// most its kill delay and companionReapGrace, for the reaper to collect it.
func (l *loop) endCompanion() {
	c := l.companion
	if c == nil {
		return
	}
	defer l.closeCompanion()
	if !c.stop(l.now(), "haproxy exited") {
		return
	}
	// Counted in sleeps, not read from the loop's clock: the loop no
	// longer runs, and nothing else moves a test's clock.
	steps := int((c.killDelay + companionReapGrace) / companionReapPoll)
	for i := 1; c.alive() && i <= steps; i++ {
		time.Sleep(companionReapPoll)
		_, _, others := l.proc.Reap()
		l.reapCompanion(others)
		l.checkReaped(others)
		c.tick(c.stopAt.Add(min(time.Duration(i)*companionReapPoll, c.killDelay)))
	}
	if c.alive() {
		l.log.Error("the companion was not reaped after SIGKILL", "pid", c.pid, "left", c.left)
	}
}

// killCompanion SIGKILLs the companion's tree: hapsuper is ending.
func (l *loop) killCompanion() {
	if c := l.companion; c != nil && c.tree != nil {
		c.kill("hapsuper is ending")
		l.closeCompanion()
	}
}

// closeCompanion removes what held the companion's tree.
func (l *loop) closeCompanion() {
	if c := l.companion; c != nil && c.tree != nil {
		if err := c.tree.close(); err != nil {
			l.log.Warn("companion's containment not removed", "err", err)
		}
	}
}
