package sidecar

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"syscall"
	"time"

	"github.com/hapsuper/hapsuper/conf"
	"github.com/hapsuper/hapsuper/drain"
	"github.com/hapsuper/hapsuper/status"
	"github.com/hapsuper/hapsuper/supervisor"
)

// loop owns the drain and the gate. Readings of the master CLI, gate
// requests, deletions a gate request found and signals arrive here one at a
// time, so nothing else needs a lock.
//
// The gate: a request while the pod is not known to be deleted is answered
// at once (notDeleting, so that its server may read the pod and say
// otherwise: deletion). From the deletion on, requests are held until the
// drain's Tick says SoftStop (its conditions, or its bound, which leaves the
// kubelet's stop signal its share of the grace period), then all answered;
// later ones are answered at once. HAProxy is gone when the master CLI
// refuses (or its socket is missing) for goneAfter from the deletion on;
// before it, that is a restart the loop waits out.
type loop struct {
	log      *slog.Logger
	drain    *drain.Drain
	settings conf.Settings
	mode     string
	routing  supervisor.Routing // nil: routing off
	publish  func(status.Snapshot)
	fast     func(bool) // the poller's pace; nil in tests
	now      func() time.Time
	// s6SoftStop soft-stops HAProxy through its s6 supervisor (--s6-service)
	// at the drain's end; the gate then holds until HAProxy is gone or the
	// deadline. nil: the kubelet's stop signal soft-stops HAProxy.
	s6SoftStop func() error
	untilGone  bool // the gate holds until HAProxy is gone (after an s6 soft stop)

	last      supervisor.Reading
	master    int       // the master show proc listed last
	found     bool      // the master CLI answered at least once
	waiting   time.Time // when "waiting for the master CLI" was last logged
	started   time.Time
	deleting  bool
	held      []chan<- answer
	released  time.Time // when the gate opened; zero until then
	result    string    // what the gate answers once open
	stopping  bool      // every worker said it is stopping since the gate opened
	goneSince time.Time // first of the readings in a row whose failure says HAProxy is gone; zero otherwise
	lost      bool      // gone while the pod is not being deleted (a liveness restart), until it answers again
	exited    bool
	routingAt drain.RoutingState // last logged
}

// answer is the gate's reply to one request. notDeleting: answered at once
// because no deletion is known; the server may read the pod and come back.
type answer struct {
	text        string
	notDeleting bool
}

// ask is one gate request: when it arrived and where the answer goes.
type ask struct {
	at    time.Time
	reply chan<- answer
}

// deletion is a deletion found by reading the pod, with its grace period
// (0: not set).
type deletion struct {
	at    time.Time
	grace time.Duration
}

// goneAfter is how long the master CLI must refuse, from the deletion on,
// before HAProxy counts as gone: a master that re-executes for a reload
// refuses for tens of milliseconds.
const goneAfter = time.Second

// waitLogEvery is how often the log repeats that the master CLI does not
// answer yet.
const waitLogEvery = 30 * time.Second

// run returns the exit code once HAProxy is gone after a deletion, or a
// stop signal came.
func (l *loop) run(ctx context.Context, readings <-chan supervisor.Reading, asks <-chan ask, deletions <-chan deletion, sigs <-chan os.Signal) int {
	tick := time.NewTicker(l.settings.PollInterval)
	defer tick.Stop()
	l.started = l.now()
	for !l.exited {
		select {
		case r := <-readings:
			l.onReading(r)
		case a := <-asks:
			l.onAsk(a)
		case d := <-deletions:
			l.onDeletion(d.at, d.grace, "pod read by the gate")
		case sig := <-sigs:
			l.onSignal(sig.(syscall.Signal))
		case <-tick.C:
		case <-ctx.Done():
			l.answerHeld("hapsuper interrupted: the gate opens")
			return 1
		}
		if !l.exited {
			l.step()
		}
		l.publish(supervisor.Snapshot(l.drain.Status(l.now()), l.settings, l.mode, l.master, l.last))
	}
	return 0
}

// onReading takes one poll of the master CLI.
func (l *loop) onReading(r supervisor.Reading) {
	now := l.now()
	l.last = r
	l.drain.Observe(r.Observation)
	if err := r.Observation.Err; err != nil {
		l.onFailedReading(err, now)
		return
	}
	l.goneSince = time.Time{}
	l.master = r.Sample.Master.PID
	if l.lost {
		l.lost = false
		l.log.Info("haproxy found again", "master", l.master, "workers", len(r.Sample.Workers))
	}
	if !l.found {
		l.found = true
		l.drain.Ready(now)
		l.log.Info("haproxy found", "socket", l.settings.MasterSocket, "master", l.master,
			"workers", len(r.Sample.Workers), "waited_s", now.Sub(l.started).Round(time.Millisecond).Seconds())
	}
	if !l.released.IsZero() && !l.stopping && len(r.Sample.Workers) > 0 && allStopping(r) {
		l.stopping = true
		l.log.Info("soft stop seen: every worker is stopping", "after_gate_s", now.Sub(l.released).Round(time.Millisecond).Seconds(),
			"sessions", sessions(r))
	}
}

// onFailedReading logs the wait for HAProxy at start and notices that it is
// gone once the pod is being deleted.
func (l *loop) onFailedReading(err error, now time.Time) {
	if !l.found && (l.waiting.IsZero() || now.Sub(l.waiting) >= waitLogEvery) {
		l.waiting = now
		l.log.Info("waiting for HAProxy's master CLI", "socket", l.settings.MasterSocket,
			"waited_s", now.Sub(l.started).Round(time.Second).Seconds(), "err", err)
	}
	if !gone(err) {
		l.goneSince = time.Time{}
		return
	}
	if l.goneSince.IsZero() {
		l.goneSince = now
	}
	if now.Sub(l.goneSince) < goneAfter {
		return
	}
	if !l.deleting {
		if l.found && !l.lost {
			l.lost = true
			l.log.Warn("haproxy gone while the pod is not being deleted: waiting for it to come back (a liveness or startup probe's restart?)",
				"socket", l.settings.MasterSocket, "err", err)
		}
		return
	}
	l.exited = true
	l.drain.MasterExited(now)
	st := l.drain.Status(now)
	attrs := []any{"reason", string(st.Reason)}
	if !l.released.IsZero() {
		attrs = append(attrs, "after_gate_s", l.goneSince.Sub(l.released).Round(time.Millisecond).Seconds())
	} else {
		attrs = append(attrs, "gate", "never opened: HAProxy stopped before the drain ended (no preStop hook asked the gate?)")
	}
	l.log.Info("haproxy gone", attrs...)
	l.answerHeld("HAProxy is gone")
}

// gone says a failed poll means no master listens on the socket any more.
func gone(err error) bool {
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, fs.ErrNotExist)
}

// onAsk answers a gate request or holds it.
func (l *loop) onAsk(a ask) {
	switch {
	case !l.released.IsZero() && !l.untilGone:
		// The kubelet's hook came after the drain ended (a kubelet slow to
		// act on the deletion): HAProxy may stop at once.
		a.reply <- answer{text: l.result}
		l.log.Info("gate asked after the drain ended: answered at once", "result", l.result)
	case l.untilGone:
		l.held = append(l.held, a.reply)
		l.log.Info("gate asked: held until HAProxy is gone", "held", len(l.held))
	case !l.deleting && l.routing != nil:
		a.reply <- answer{text: "the pod is not being deleted: nothing to wait for", notDeleting: true}
	default:
		if !l.deleting { // no routing observation: every request is a stop
			l.onDeletion(a.at, 0, "gate asked without routing observation")
		}
		l.held = append(l.held, a.reply)
		l.log.Info("gate asked: held until the drain ends", "held", len(l.held))
	}
}

// onDeletion starts the drain at at, once.
func (l *loop) onDeletion(at time.Time, grace time.Duration, via string) {
	if grace > 0 {
		l.drain.SetPodGracePeriod(grace)
	}
	if l.deleting {
		return
	}
	l.deleting = true
	l.drain.StopRequested(at)
	if l.routing != nil {
		l.routing.StopRequested(at)
	}
	if l.fast != nil {
		l.fast(true)
	}
	st := l.drain.Status(l.now())
	l.log.Info("drain started", "via", via, "bound", st.BoundAt, "deadline", st.Deadline)
}

// onSignal: the kubelet stops a sidecar once every other container has
// exited; whatever is held is answered, and hapsuper exits.
func (l *loop) onSignal(sig syscall.Signal) {
	if sig != syscall.SIGTERM && sig != syscall.SIGINT && sig != syscall.SIGQUIT {
		l.log.Debug("signal ignored", "signal", conf.SignalName(sig))
		return
	}
	now := l.now()
	attrs := []any{"signal", conf.SignalName(sig), "held", len(l.held)}
	if l.deleting {
		// The kubelet stops a native sidecar once the pod's other
		// containers exited: HAProxy is gone.
		l.drain.MasterExited(now)
		attrs = append(attrs, "reason", string(l.drain.Status(now).Reason))
	}
	l.log.Info("stop signal: exiting", attrs...)
	l.answerHeld("hapsuper stops: the gate opens")
	l.exited = true
}

// step feeds routing to the drain and opens the gate when it ends.
func (l *loop) step() {
	now := l.now()
	if l.routing != nil {
		if grace, ok := l.routing.PodGracePeriod(); ok {
			l.onDeletion(now, grace, "pod watch")
		}
		l.drain.SetRouting(l.routing.Routing(now), now)
		if r := l.drain.Routing(); r.State != l.routingAt {
			l.routingAt = r.State
			l.log.Info("routing", "state", string(r.State), "detail", r.Detail())
		}
	}
	switch l.drain.Tick(now) {
	case drain.SoftStop:
		st := l.drain.Status(now)
		level := slog.LevelInfo
		if st.Reason == drain.ReasonBound || st.Reason == drain.ReasonUnavailable || st.Reason == drain.ReasonUnverified {
			level = slog.LevelWarn
		}
		took := st.SoftStopAt.Sub(st.StopAt).Round(time.Millisecond).Seconds()
		attrs := []any{"reason", string(st.Reason), "duration_s", took, "held", len(l.held)}
		if st.Detail != "" {
			attrs = append(attrs, "detail", st.Detail)
		}
		l.log.Log(context.Background(), level, "drain ended", append(attrs, "gate", "open")...)
		if l.routing != nil {
			l.routing.DrainEnded(st)
		}
		l.released = now
		l.result = fmt.Sprintf("drain ended %s after %.3fs: stop HAProxy now", st.Reason, took)
		if l.s6SoftStop == nil {
			l.answerHeld(l.result)
			return
		}
		if err := l.s6SoftStop(); err != nil {
			l.log.Error("soft stop through s6 failed: the gate opens, the stop signal decides", "err", err)
			l.answerHeld(l.result)
			return
		}
		l.untilGone = true
		l.log.Info("soft stop sent through s6: the gate holds until HAProxy is gone", "held", len(l.held))
	case drain.HardStop:
		l.log.Warn("deadline passed with HAProxy still answering: the kubelet kills it at the grace period's end",
			"sessions", l.drain.Status(now).Sessions())
		if l.untilGone {
			l.untilGone = false
			l.answerHeld("deadline passed with HAProxy still running: stop it now")
		}
	}
}

// answerHeld answers every held request with text.
func (l *loop) answerHeld(text string) {
	for _, r := range l.held {
		r <- answer{text: text}
	}
	l.held = nil
}

func allStopping(r supervisor.Reading) bool {
	for _, w := range r.Sample.Workers {
		if !w.Info.Stopping {
			return false
		}
	}
	return true
}

func sessions(r supervisor.Reading) int64 {
	var n int64
	for _, w := range r.Sample.Workers {
		n += w.Info.CurrConns
	}
	return n
}
