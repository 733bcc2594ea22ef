package supervisor

import (
	"syscall"
	"time"

	"github.com/hapsuper/hapsuper/drain"
	"github.com/hapsuper/hapsuper/status"
)

// A reload asked of hapsuper (SIGHUP, SIGUSR2, a "reload" on the status
// socket) goes:
//
//	requestReload → haproxy -c (startCheck) → output and exit (onCheckOutput,
//	checkReaped) → finishCheck: SIGUSR2 to the master when the check passed,
//	"reload refused" when it failed → reloads.observe: ok or failed
//
// One check runs at a time; a request during a check is queued and checked
// once it ends (the files may have changed again): requests queued
// together share that reload, and whoever asked on the status socket gets
// its outcome. A check that passes once HAProxy is stopping is not sent.

// askReload takes a reload asked over the status socket (gopherd, s6-svc):
// the next reload checked answers it with its outcome (reloads.wait).
func (l *loop) askReload(a status.ReloadAsk, now time.Time) {
	l.reloads.wait(a)
	l.requestReload(a.Origin, now)
}

// requestReload starts the check of a reload asked by origin (a signal's
// name, or the asker over the status socket), or queues it behind the
// check under way.
func (l *loop) requestReload(origin string, now time.Time) {
	if l.stopping(now) {
		l.log.Info("reload ignored: HAProxy is stopping", "signal", origin)
		l.reloads.abandon("HAProxy is stopping: no reload is sent now")
		return
	}
	if l.check != nil || l.reloads.held {
		l.log.Info("reload queued: the previous one is being checked", "signal", origin)
		l.queued = origin
		return
	}
	l.log.Info("reload", "signal", origin)
	c, err := l.startCheck(origin, now)
	if err != nil {
		rec := l.reloads.refusedNow(now, origin, err.Error())
		l.logReload(rec)
		return
	}
	l.check = c
	l.reloads.checking(now, origin)
}

// stopping reports whether HAProxy was told to stop: no reload is sent then.
func (l *loop) stopping(now time.Time) bool {
	ph := l.drain.Status(now).Phase
	return ph == drain.Stopping || ph == drain.Exited || l.exited || !l.sent.soft.IsZero()
}

// checkOutput is the channel the running check's output arrives on; nil
// (never ready) when none runs or it has arrived.
func (l *loop) checkOutput() <-chan []byte {
	if l.check == nil || l.check.outDone {
		return nil
	}
	return l.check.out
}

func (l *loop) onCheckOutput(out []byte) {
	l.check.output, l.check.outDone = out, true
	l.finishCheck()
}

// checkReaped takes the check's exit from the reaper's harvest.
func (l *loop) checkReaped(others map[int]int) {
	if l.check == nil {
		return
	}
	if code, ok := others[l.check.pid]; ok {
		l.check.reaped(code)
		l.finishCheck()
	}
}

// checkTimeout kills a check that ran past reloadCheckTimeout; its exit
// then ends it as refused.
func (l *loop) checkTimeout(now time.Time) {
	if l.check == nil || l.check.killed || now.Sub(l.check.started) < reloadCheckTimeout {
		return
	}
	l.log.Warn("haproxy -c runs too long: killing it", "pid", l.check.pid, "timeout", reloadCheckTimeout.String())
	if err := l.check.kill(); err != nil {
		l.log.Warn("kill haproxy -c failed", "pid", l.check.pid, "err", err)
	}
}

// endCheck kills a check still running when hapsuper ends.
func (l *loop) endCheck() {
	if l.check != nil && !l.check.done() {
		_ = l.check.kill()
	}
}

// finishCheck acts on a check that is over: sends the reload or refuses
// it, then starts the queued one.
func (l *loop) finishCheck() {
	c := l.check
	if c == nil || !c.done() {
		return
	}
	l.check = nil
	now := l.now()
	switch why := c.failure(); {
	case why != "":
		l.logReload(l.reloads.refused(now, why))
	case l.stopping(now):
		l.reloads.dropped()
		l.log.Info("reload not sent: HAProxy is stopping", "signal", c.origin)
	case !l.reloads.counting():
		// Sent now, the reload would fall into the baseline of the
		// master's reload count (the first sample) and never be seen.
		l.reloads.held = true
		l.log.Info("reload checked: held until the master CLI has been read once", "signal", c.origin, "check_s", now.Sub(c.started).Seconds())
		return
	default:
		l.log.Info("reload checked: sending it to HAProxy", "signal", c.origin, "check_s", now.Sub(c.started).Seconds())
		l.signalMaster(syscall.SIGUSR2)
		l.reloads.sent(now)
	}
	l.startQueued(now)
}

// sendHeld sends the reload held for the master's first sample once it
// was read (or drops it once HAProxy is stopping), then starts the queued
// one.
func (l *loop) sendHeld(now time.Time) {
	switch {
	case !l.reloads.held:
		return
	case l.stopping(now):
		l.reloads.held = false
		l.reloads.dropped()
		l.log.Info("reload not sent: HAProxy is stopping")
	case l.reloads.counting():
		l.reloads.held = false
		l.log.Info("reload checked: sending it to HAProxy")
		l.signalMaster(syscall.SIGUSR2)
		l.reloads.sent(now)
	default:
		return
	}
	l.startQueued(now)
}

// startQueued starts the check of the reload queued behind the last one.
func (l *loop) startQueued(now time.Time) {
	if q := l.queued; q != "" {
		l.queued = ""
		l.requestReload(q, now)
	}
}

// logReload logs a reload that ended: ok at INFO, refused and failed at
// ERROR (the pod keeps serving the previous configuration).
func (l *loop) logReload(r status.Reload) {
	switch r.Result {
	case status.ReloadOK:
		l.log.Info("haproxy reloaded", "origin", r.Origin, "worker", r.Worker, "took_s", r.Ended.Sub(r.At).Seconds())
		l.reinspect()
	case status.ReloadRefused:
		l.log.Error("reload refused: the new configuration does not load; HAProxy keeps serving the previous one", "origin", r.Origin, "why", r.Detail)
	case status.ReloadFailed:
		l.log.Error("reload failed: HAProxy keeps serving the previous configuration", "origin", r.Origin, "why", r.Detail)
	}
}
