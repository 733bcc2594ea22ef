package supervisor

import (
	"context"
	"log/slog"
	"os"
	"slices"
	"syscall"
	"time"

	"github.com/hapsuper/hapsuper/conf"
	"github.com/hapsuper/hapsuper/drain"
	"github.com/hapsuper/hapsuper/status"
)

// loop owns the drain state machine and the master process. Everything that
// happens to hapsuper (signals, child exits, polls, readiness) arrives here,
// one at a time, so nothing else needs a lock.
type loop struct {
	log      *slog.Logger
	drain    *drain.Drain
	board    *status.Board
	settings conf.Settings
	graceful *frontendSet // frontends whose soft stop is graceful, shared with the poller
	master   int          // the master's pid, for logs and status
	proc     process      // the master, to signal, kill and reap
	stops    map[syscall.Signal]bool
	now      func() time.Time
	mode     string  // the routing mode, for status
	routing  Routing // nil when routing is off
	pace     *pace   // the poller's rate; nil in tests that run no poller

	// The load balancers' health check of the pod (--lb-check-bind); nil
	// without one. lbIO is the poller's, told at the stop to fail it.
	lbCheck *lbCheck
	lbIO    *lbCheckIO

	// Reloads: every one is followed to its outcome (reloads); hapsuper's
	// own are checked first (check), one at a time, a request that comes
	// during a check queued (queued: its signal's name).
	reloads    *reloads
	reloading  *reloadSeen // when HAProxy was last seen reloading, shared with the poller (reloading.go)
	check      *reloadCheck
	queued     string
	startCheck func(origin string, now time.Time) (*reloadCheck, error)
	asks       <-chan status.ReloadAsk // reloads asked on the status socket; nil in tests

	// The companion (--companion), nil without one, and what the loop
	// does about it (companionloop.go).
	companion *companion
	comp      companionRecord

	// The workers' stop lines, from HAProxy's stderr (stopline.go); nil
	// without a relay.
	stopLines <-chan workerStop

	// Reads the configuration again after each reload, off the loop
	// (reinspect.go); nil until the first.
	inspector *inspector
	// Workers that come after the soft stop (afterstop.go); procs lists
	// the processes in /proc, nil in tests that have none.
	after afterSoftStop
	procs func() ([]procStat, error)

	ready    bool
	polls    pollRecord
	sent     stopSent
	logged   logged
	exitCode int
	exited   bool
}

// pollRecord is what the master-CLI polls last told.
type pollRecord struct {
	last    observation
	good    time.Time // when the last successful poll began
	bad     time.Time // when the last failed poll began
	failing time.Time // when the first failed poll since the last success began; zero while they succeed
}

// stopSent is what the loop sent to stop HAProxy, and when.
type stopSent struct {
	soft   time.Time // SIGUSR1, last sent for the soft stop
	hard   time.Time // the hard stop
	killed bool      // SIGKILL to the process group
}

// logged is what the log already said, so that only changes are logged.
type logged struct {
	routing       drain.RoutingState
	routingDetail string
	late          int  // late arrivals, in total
	lbMarkedDown  bool // the balancers checking the pod marked it down
	cliLost       bool // polls of the master CLI fail for longer than cliLostAfter
}

// cliLostAfter is how long polls of the master CLI may fail before it is
// called lost: a master that re-executes for a reload (up to 3.0) refuses
// its CLI for a moment, tens of ms; a reload under way may take up to
// reloadTimeout.
const cliLostAfter = 3 * time.Second

// checkCLILost logs, once, that the master CLI has been failing longer
// than a moment, until the soft stop (after which the master leaves).
func (l *loop) checkCLILost(o observation) {
	if l.polls.failing.IsZero() {
		l.polls.failing = o.started
	}
	after := cliLostAfter
	if l.reloads.underway() {
		after = reloadTimeout
	}
	if l.logged.cliLost || !l.sent.soft.IsZero() || o.started.Sub(l.polls.failing) < after {
		return
	}
	l.logged.cliLost = true
	l.log.Warn("master CLI lost: polls fail; the drain cannot read HAProxy's counters until it answers",
		"failing_s", o.started.Sub(l.polls.failing).Round(time.Millisecond).Seconds(), "err", o.obs.Err)
}

// noteLate logs late arrivals (drain/audit.go) as the drain counts them.
func (l *loop) noteLate(late int) {
	l.logged.late += late
	l.log.Warn("new connections after routing was observed withdrawn",
		"late", late, "total", l.logged.late, "why", "a path hapsuper does not observe still sends here: the drain cannot end routed-away")
}

// run returns the exit code once the master is gone.
func (l *loop) run(ctx context.Context, sigs <-chan os.Signal, obs <-chan observation, events <-chan notifyEvent) int {
	tick := time.NewTicker(l.settings.PollInterval)
	defer tick.Stop()
	defer func() { l.inspector.stop() }() // the one a reload started, if any
	wake := time.NewTimer(time.Hour)
	defer wake.Stop()
	for !l.exited {
		l.setWake(wake)
		select {
		case sig := <-sigs:
			l.onSignal(sig.(syscall.Signal))
		case o := <-obs:
			l.onObservation(o)
		case ev := <-events:
			l.onNotify(ev)
		case out := <-l.checkOutput():
			l.onCheckOutput(out)
		case a := <-l.asks:
			l.askReload(a, l.now())
		case r := <-l.inspector.resultsCh():
			l.onInspection(r)
		case st := <-l.stopLines:
			l.drain.WorkerStopped(st.pid, st.proxy, st.opened, l.now())
		case <-tick.C:
			l.reap() // a coalesced SIGCHLD must not leave a zombie behind
		case <-wake.C:
			l.reap() // the companion's time: step acts on it
		case <-ctx.Done():
			l.log.Warn("supervisor interrupted: hard stop")
			l.signalMaster(syscall.SIGTERM)
			l.killGroup()
			l.killCompanion()
			l.endCheck()
			return 1
		}
		if !l.exited {
			l.step()
		}
		l.setPace(l.publish(), tick)
	}
	return l.exitCode
}

// wakeClearing paces the loop while the companion's processes are being
// reaped: what is left is read again this often.
const wakeClearing = 20 * time.Millisecond

// setWake sets wake to fire when the companion next needs the loop (its
// next start, its kill delay's end), so that it does not wait for the
// next tick, which comes every second while HAProxy serves.
func (l *loop) setWake(wake *time.Timer) {
	at := l.nextWake()
	d := time.Hour
	if !at.IsZero() {
		d = max(at.Sub(l.now()), 0)
	}
	wake.Reset(d) // Go 1.23+: no stale value is received after Reset
}

// nextWake is when the loop must run next for the companion; zero: no
// time of its is due.
func (l *loop) nextWake() time.Time {
	c := l.companion
	if c == nil {
		return time.Time{}
	}
	at := c.wake()
	if c.clearingNow() {
		at = l.now().Add(wakeClearing)
	}
	return at
}

// setPace polls the master CLI and ticks fast until HAProxy serves and its
// workers were read, and from the stop request on; slowly while it serves.
func (l *loop) setPace(phase drain.Phase, tick *time.Ticker) {
	if l.pace == nil {
		return
	}
	fast := phase != drain.Serving || len(l.polls.last.sample.Workers) == 0 || l.reloads.underway() || !l.sent.soft.IsZero()
	if !l.pace.set(fast) {
		return
	}
	if fast {
		tick.Reset(l.settings.PollInterval)
	} else {
		tick.Reset(max(servingPollInterval, l.settings.PollInterval))
	}
}

func (l *loop) onSignal(sig syscall.Signal) {
	now := l.now()
	switch {
	case sig == syscall.SIGCHLD:
		l.reap()
	case l.stops[sig]:
		if !l.drain.StopRequested(now) {
			l.log.Info("stop request ignored: a drain is under way", "signal", conf.SignalName(sig))
			return
		}
		if l.routing != nil {
			l.routing.StopRequested(now)
		}
		if l.lbIO != nil {
			l.lbIO.failing.Store(true) // from the poll the fast pace now asks for
		}
		st := l.drain.Status(now)
		l.log.Info("drain started", "signal", conf.SignalName(sig), "bound", st.BoundAt, "deadline", st.Deadline)
	case sig == syscall.SIGHUP || sig == syscall.SIGUSR2:
		if !l.refuseReloadAfterSoftStop(conf.SignalName(sig)) {
			l.requestReload(conf.SignalName(sig), now)
		}
	case sig == syscall.SIGUSR1:
		l.log.Info("soft stop now: SIGUSR1 is not a stop signal, forwarded")
		l.signalMaster(syscall.SIGUSR1)
		l.softStopSent(now)
	case sig == syscall.SIGINT || sig == syscall.SIGQUIT || sig == syscall.SIGTERM:
		l.log.Warn("hard stop now: drain skipped", "signal", conf.SignalName(sig))
		l.signalMaster(syscall.SIGTERM)
	}
}

func (l *loop) onObservation(o observation) {
	l.polls.last = o
	if late := l.drain.Observe(o.obs); late > 0 {
		l.noteLate(late)
	}
	if l.lbCheck != nil {
		l.lbCheck.observe(o.lb)
	}
	if o.obs.Err != nil {
		l.polls.bad = o.started
		l.log.Debug("poll failed", "err", o.obs.Err)
		l.checkCLILost(o)
		return
	}
	if l.logged.cliLost {
		l.logged.cliLost = false
		l.log.Info("master CLI answers again", "failing_s", o.started.Sub(l.polls.failing).Round(time.Millisecond).Seconds())
	}
	l.polls.good, l.polls.failing = o.started, time.Time{}
	if !l.ready && len(o.sample.Workers) > 0 {
		l.markReady("master CLI")
	}
	if rec, ok := l.reloads.observe(o.obs.At, o.sample); ok {
		l.logReload(rec)
	}
	l.startCompanion()
	l.watchAfterSoftStop(l.now(), &o)
	l.checkSoftStop(o)
}

// resendBlind sends the soft stop again when polls begun after it failed
// and none succeeded for softStopRetry: a master that re-executes, or a
// 3.2 master whose new worker still loads, refuses or fails polls, and may
// drop the SIGUSR1 meanwhile. A SIGUSR1 to a master that took it already
// is harmless.
func (l *loop) resendBlind(now time.Time) {
	if l.sent.soft.IsZero() || !l.sent.hard.IsZero() || now.Sub(l.sent.soft) < softStopRetry ||
		l.polls.good.After(l.sent.soft) || !l.polls.bad.After(l.sent.soft) {
		return
	}
	l.log.Warn("soft stop not confirmed: the master CLI does not answer; sending it again", "since_s", now.Sub(l.sent.soft).Seconds())
	l.sent.soft = now
	l.signalMaster(syscall.SIGUSR1)
}

// checkSoftStop sends the soft stop again, until the hard stop, while a
// worker still does not say it is stopping, whatever show proc lists it as
// (3.1+ lists the worker a failed reload kept under "old workers"):
// HAProxy 2.6 was seen ignoring a SIGUSR1 that arrived just after its
// workers started (lost 4 times in 6), and every version one that follows
// a SIGUSR2 by 5 ms (3 of 3 on each of 2.6, 3.0, 3.2, 3.4).
func (l *loop) checkSoftStop(o observation) {
	if l.sent.soft.IsZero() || !l.sent.hard.IsZero() || o.started.Sub(l.sent.soft) < softStopRetry {
		return
	}
	for _, w := range o.sample.Workers {
		if !w.Info.Stopping {
			l.log.Warn("soft stop not taken by a worker: sending it again", "worker", w.Process.PID)
			l.sent.soft = l.now()
			l.signalMaster(syscall.SIGUSR1)
			return
		}
	}
}

func (l *loop) onNotify(ev notifyEvent) {
	switch ev {
	case notifyReady:
		if !l.ready {
			l.markReady("notify")
		}
	case notifyReloading:
		if l.ready { // HAProxy also says RELOADING=1 while it starts: no reload then
			l.reloading.mark(l.now())
			l.log.Debug("haproxy reloading", "via", "notify")
		}
	}
}

func (l *loop) markReady(via string) {
	l.ready = true
	l.drain.Ready(l.now())
	l.log.Info("haproxy ready", "via", via)
	l.startCompanion()
}

// step lets the drain decide and carries out what it decided.
func (l *loop) step() {
	now := l.now()
	l.feedRouting(now)
	switch l.drain.Tick(now) {
	case drain.SoftStop:
		st := l.drain.Status(now)
		// WARN when the drain could not observe everything: its detail
		// says what.
		level := slog.LevelInfo
		if st.Reason == drain.ReasonBound || st.Reason == drain.ReasonUnavailable || st.Reason == drain.ReasonUnverified {
			level = slog.LevelWarn
		}
		attrs := []any{"reason", string(st.Reason), "duration_s", st.SoftStopAt.Sub(st.StopAt).Round(time.Millisecond).Seconds()}
		if st.Detail != "" {
			attrs = append(attrs, "detail", st.Detail) // none for routed-away: nothing to add
		}
		l.log.Log(context.Background(), level, "drain ended", attrs...)
		if l.routing != nil {
			l.routing.DrainEnded(st)
		}
		l.softStop(now)
	case drain.HardStop:
		l.log.Warn("hard stop", "pid", l.master, "why", "deadline reached with sessions open", "sessions", l.drain.Status(now).Sessions())
		l.signalMaster(syscall.SIGTERM)
		l.sent.hard = now
		l.softStopSent(now) // a drain hard-stopped without soft stop: workers after it are stopped too
	}
	l.tickCompanion(now)
	l.watchAfterSoftStop(now, nil)
	l.checkTimeout(now)
	l.sendHeld(now)
	l.resendBlind(now)
	if !l.sent.hard.IsZero() && !l.sent.killed && now.Sub(l.sent.hard) >= killAfter(l.settings.Margin) {
		l.log.Error("haproxy did not exit after the hard stop: killing its process group", "pid", l.master)
		l.killGroup()
	}
}

// feedRouting hands the routing verdict and, from the stop on, the pod's
// own health check to the drain, which combines them, and the pod's own
// grace period once the routing watch has seen it.
func (l *loop) feedRouting(now time.Time) {
	if l.routing == nil && l.lbCheck == nil {
		return
	}
	r := drain.RoutingObservationOff()
	if l.routing != nil {
		r = l.routing.Routing(now)
	}
	if l.lbCheck != nil && l.lbIO.failing.Load() { // set at the stop request
		c := l.lbCheck.condition()
		l.drain.SetPodCheck(c)
		if c.MarkedDown() && !l.logged.lbMarkedDown {
			l.logged.lbMarkedDown = true
			l.log.Info("load balancers checking the pod marked it down", "detail", c.String())
		}
	}
	if late := l.drain.SetRouting(r, now); late > 0 {
		l.noteLate(late)
	}
	r = l.drain.Routing()
	detail := r.Detail()
	if r.State != l.logged.routing { // the detail carries ages: it changes on every poll
		l.log.Info("routing", "state", string(r.State), "detail", detail)
	} else if detail != l.logged.routingDetail {
		l.log.Debug("routing", "state", string(r.State), "detail", detail)
	}
	l.logged.routing, l.logged.routingDetail = r.State, detail
	if l.routing == nil {
		return
	}
	grace, ok := l.routing.PodGracePeriod()
	if !ok || !l.drain.SetPodGracePeriod(grace) {
		return
	}
	if st := l.drain.Status(now); !st.StopAt.IsZero() {
		l.log.Info("deadline moved to the pod's grace period", "grace", grace.String(), "deadline", st.Deadline, "bound", st.BoundAt)
	} else {
		l.log.Info("the pod's grace period is shorter: the deadline will count from it", "grace", grace.String())
	}
}

// reap collects exited children and notices the master's exit.
func (l *loop) reap() {
	code, done, others := l.proc.Reap()
	l.reapCompanion(others)
	l.checkReaped(others)
	if !done {
		return
	}
	l.exited = true
	l.exitCode = l.exitCodeWith(code)
	l.drain.MasterExited(l.now())
	switch {
	case code == 0:
		l.log.Info("haproxy exited", "pid", l.master, "code", code)
	case code > 128 && code < 128+65:
		// Killed by that signal, or (137) a worker of it was SIGKILLed.
		l.log.Error("haproxy exited", "pid", l.master, "code", code, "killed", conf.SignalName(syscall.Signal(code-128))+" to the master, or to a worker (the master then exits 128+N itself)")
	default:
		l.log.Error("haproxy exited", "pid", l.master, "code", code)
	}
	l.killGroup() // workers left behind by a killed master
	l.endCheck()
	l.endCompanion()
	l.proc.Reap()
}

func (l *loop) signalMaster(sig syscall.Signal) {
	if l.exited {
		return
	}
	if err := l.proc.Signal(sig); err != nil {
		l.log.Warn("signal to haproxy master failed", "signal", conf.SignalName(sig), "pid", l.master, "err", err)
	}
}

// killGroup SIGKILLs HAProxy's process group (the master's pid is its id).
func (l *loop) killGroup() {
	l.sent.killed = true
	if err := l.proc.KillGroup(); err != nil {
		l.log.Warn("kill haproxy process group failed", "pgid", l.master, "err", err)
	}
}

// publish hands the state to status and metrics and returns the phase.
func (l *loop) publish() drain.Phase {
	now := l.now()
	st := l.drain.Status(now)
	snap := status.Snapshot{
		Phase:     st.Phase,
		MasterPID: l.master,
		Drain:     statusDrain(st, l.after.records),
		Settings:  statusSettings(l.settings, l.mode),
		Workers:   []status.Worker{},
		Reloads:   l.reloads.snapshot(),
	}
	if l.companion != nil {
		snap.Companion = l.companion.status(now)
	}
	if o := l.polls.last; o.obs.Err != nil {
		snap.PollError = o.obs.Err.Error()
	} else if !o.obs.At.IsZero() {
		snap.ObservedAt = o.obs.At
	}
	for _, w := range st.Workers {
		snap.Workers = append(snap.Workers, status.Worker{PID: w.PID, Old: w.Old, Sessions: w.Sessions, Requests: w.Requests, Connections: w.Connections})
	}
	l.board.Publish(snap)
	return st.Phase
}

// statusDrain is the drain as status shows it.
func statusDrain(st drain.Status, after []status.ReloadAfterSoftStop) status.Drain {
	d := status.Drain{
		Phase: st.Phase, StopRequested: st.StopAt, Bound: st.BoundAt, Deadline: st.Deadline,
		SoftStop: st.SoftStopAt, HardStop: st.HardStopAt, Exited: st.ExitedAt,
		Reason: st.Reason, Detail: st.Detail, LateConnections: st.LateConnections,
		ReloadsAfterSoftStop: slices.Clone(after),
	}
	for _, c := range st.Conditions {
		d.Conditions = append(d.Conditions, status.Condition{Name: c.Name, Met: c.Met, Since: c.Since, Detail: c.Detail, Routing: c.Routing, PendingNodes: c.PendingNodes})
	}
	return d
}

// softStopRetry is how long a worker may take to report Stopping after a
// soft stop before the signal is sent again.
const softStopRetry = 500 * time.Millisecond

func killAfter(margin time.Duration) time.Duration {
	return min(margin/2, time.Second)
}
