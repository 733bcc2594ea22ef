package supervisor

import (
	"syscall"
	"time"
)

// companionRecord is what the loop did about the companion.
type companionRecord struct {
	held       time.Time // the drain ended: the soft stop waits for the companion to be gone
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

// companionFailed soft-stops HAProxy at once, as gopherd's on-failure:
// shutdown does: the pod is not being deleted, so there is no withdrawal to
// wait for. HAProxy's hard-stop-after bounds the soft stop, and
// tickCompanion hard-stops it at the stop budget; hapsuper then exits with
// the companion's code.
func (l *loop) companionFailed(code int, now time.Time) {
	l.comp.failedCode, l.comp.failedAt = code, now
	if !l.sent.soft.IsZero() {
		return
	}
	l.log.Error("soft stop: the companion failed", "pid", l.master, "companion_code", code)
	l.signalMaster(syscall.SIGUSR1)
	l.sent.soft = now
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
	l.comp.held = time.Time{}
	if !l.sent.soft.IsZero() {
		return // the companion failed meanwhile: sent already
	}
	l.log.Info("soft stop", "pid", l.master)
	l.signalMaster(syscall.SIGUSR1)
	l.sent.soft = now
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
			l.log.Error("the companion was not reaped after SIGKILL: soft stop anyway", "pid", c.pid)
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
	if c == nil || !c.stop(l.now(), "haproxy exited") {
		return
	}
	// Counted in sleeps, not read from the loop's clock: the loop no
	// longer runs, and nothing else moves a test's clock.
	steps := int((c.killDelay + companionReapGrace) / companionReapPoll)
	for i := 1; c.alive() && i <= steps; i++ {
		time.Sleep(companionReapPoll)
		if time.Duration(i)*companionReapPoll >= c.killDelay {
			c.tick(c.stopAt.Add(c.killDelay))
		}
		_, _, others := l.proc.Reap()
		l.reapCompanion(others)
		l.checkReaped(others)
	}
	if c.alive() {
		l.log.Error("the companion was not reaped after SIGKILL", "pid", c.pid)
	}
}

// killCompanion SIGKILLs the companion's group: hapsuper is ending.
func (l *loop) killCompanion() {
	if c := l.companion; c != nil && c.alive() {
		if err := c.signal(c.pid, syscall.SIGKILL); err != nil {
			l.log.Warn("kill companion process group failed", "pgid", c.pid, "err", err)
		}
	}
}
