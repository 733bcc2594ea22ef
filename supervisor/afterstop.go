package supervisor

import (
	"syscall"
	"time"

	"github.com/hapsuper/hapsuper/status"
)

// After the soft stop HAProxy's listeners must stay closed. A reload that
// comes then (a master-CLI client's `reload`, a SIGUSR2 to the master)
// forks a worker that binds them again and serves: the master does not
// carry its soft stop over to the new worker. hapsuper refuses its own
// reloads from the soft stop on (onSignal, requestReload); a worker that
// appears anyway, listed by show proc or seen as a new child of the master
// in /proc, is stopped at once (SIGUSR1 to the master again; SIGTERM again
// after the hard stop) and recorded.

// afterSoftStop is what the loop knows of HAProxy's workers from the soft
// stop on.
type afterSoftStop struct {
	at      time.Time    // when the soft stop was first sent; zero before
	known   map[int]bool // workers (pids) that were there at the soft stop, or are recorded
	pending string       // a reload under way at the soft stop, whose worker may come after it
	scanned time.Time    // when /proc was last read for the master's children
	records []status.ReloadAfterSoftStop
}

// maxAfterSoftStop bounds the records kept for status.
const maxAfterSoftStop = 10

// softStopSent starts watching for workers that come after the soft stop.
func (l *loop) softStopSent(now time.Time) {
	a := &l.after
	if !a.at.IsZero() {
		return
	}
	a.at, a.known = now, make(map[int]bool, len(l.reloads.seen))
	for pid := range l.reloads.seen {
		a.known[pid] = true
	}
	for _, w := range l.polls.last.sample.Workers {
		a.known[w.Process.PID] = true
	}
	for _, w := range l.polls.last.sample.Unreachable {
		a.known[w.PID] = true
	}
	if r := l.reloads.inflight; r != nil {
		a.pending = r.Origin
	} else if r := l.reloads.check; r != nil {
		a.pending = r.Origin
	}
	if l.procs != nil {
		for _, p := range l.masterChildren() {
			a.known[p] = true
		}
	}
}

// masterChildren lists the master's children in /proc; nil when it
// cannot be read (logged at debug: show proc still tells).
func (l *loop) masterChildren() []int {
	all, err := l.procs()
	if err != nil {
		l.log.Debug("haproxy's processes not read", "err", err)
		return nil
	}
	var pids []int
	for _, p := range all {
		if p.ppid == l.master && p.state != 'Z' {
			pids = append(pids, p.pid)
		}
	}
	return pids
}

// watchAfterSoftStop looks for workers that came after the soft stop: in
// the poll just taken (o, when it succeeded) and, at most every poll
// interval, among the master's children in /proc.
func (l *loop) watchAfterSoftStop(now time.Time, o *observation) {
	a := &l.after
	if a.at.IsZero() || l.exited {
		return
	}
	if o != nil && o.obs.Err == nil {
		for _, w := range o.sample.Workers {
			if !w.Process.Old { // an old worker listens no longer, or was there
				l.workerAfterSoftStop(now, w.Process.PID, "show proc")
			}
		}
		for _, w := range o.sample.Unreachable {
			l.workerAfterSoftStop(now, w.PID, "show proc")
		}
	}
	if l.procs != nil && now.Sub(a.scanned) >= l.settings.PollInterval {
		a.scanned = now
		for _, pid := range l.masterChildren() {
			l.workerAfterSoftStop(now, pid, "a new child of the master")
		}
	}
}

// workerAfterSoftStop stops and records the worker pid when it is new.
func (l *loop) workerAfterSoftStop(now time.Time, pid int, via string) {
	a := &l.after
	if a.known[pid] {
		return
	}
	a.known[pid] = true
	by := "unknown: a master-CLI client or a signal to the master (hapsuper refuses its own reloads after the soft stop)"
	if a.pending != "" {
		by = "a reload under way at the soft stop (" + a.pending + ")"
	} else if c := l.companion; c != nil && c.alive() {
		by = "unknown: a master-CLI client or a signal to the master; the companion's processes were still there"
	}
	rec := status.ReloadAfterSoftStop{At: now, AfterSoftStop: status.Duration(now.Sub(a.at)), Worker: pid, Via: via, By: by}
	if l.sent.hard.IsZero() {
		rec.Action = "soft stop sent again"
		l.log.Warn("reload after the soft stop: a new worker listens again; soft stop sent again", "worker", pid, "via", via, "by", by,
			"after_soft_stop_s", now.Sub(a.at).Seconds())
		l.signalMaster(syscall.SIGUSR1)
		l.sent.soft = now
	} else {
		rec.Action = "hard stop sent again"
		l.log.Warn("reload after the hard stop: a new worker listens again; hard stop sent again", "worker", pid, "via", via, "by", by,
			"after_soft_stop_s", now.Sub(a.at).Seconds())
		l.signalMaster(syscall.SIGTERM)
	}
	if len(a.records) < maxAfterSoftStop {
		a.records = append(a.records, rec)
	}
}

// refuseReloadAfterSoftStop refuses a reload asked of hapsuper (the signal
// named origin) once the soft stop was sent, and says so: it would open
// the listeners again. It reports whether it refused.
func (l *loop) refuseReloadAfterSoftStop(origin string) bool {
	switch {
	case !l.sent.hard.IsZero():
		l.log.Warn("reload refused: HAProxy was hard-stopped", "signal", origin)
	case !l.sent.soft.IsZero():
		l.log.Warn("reload refused: HAProxy was soft-stopped, a reload would open its listeners again", "signal", origin)
	default:
		return false
	}
	return true
}
