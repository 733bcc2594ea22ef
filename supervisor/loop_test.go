package supervisor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/hapsuper/hapsuper/conf"
	"github.com/hapsuper/hapsuper/drain"
	"github.com/hapsuper/hapsuper/haproxy"
	"github.com/hapsuper/hapsuper/runtimeapi"
	"github.com/hapsuper/hapsuper/status"
)

// Scenario tests of the loop: a fake master records what the loop sends it,
// a fake clock is stepped, and every event is handed to the loop as run
// hands it (the handler, then step, then publish). Times are offsets from t0.

var t0 = time.Unix(1e9, 0)

func sec(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// fakeMaster is the HAProxy master as the loop sees it. It records every
// signal (by name) and every SIGKILL of the group ("KILL-GROUP"), with the
// offset it came at; exit makes the next Reap report the master gone.
type fakeMaster struct {
	clock  *time.Time
	sent   []string // "SIGUSR1@3s"
	code   int
	gone   bool
	others map[int]int // other children's exits, for the next Reap
}

func (m *fakeMaster) record(what string) {
	m.sent = append(m.sent, fmt.Sprintf("%s@%v", what, m.clock.Sub(t0)))
}

func (m *fakeMaster) Signal(sig syscall.Signal) error { m.record(conf.SignalName(sig)); return nil }
func (m *fakeMaster) KillGroup() error                { m.record("KILL-GROUP"); return nil }
func (m *fakeMaster) Reap() (int, bool, map[int]int) {
	gone, others := m.gone, m.others
	m.gone, m.others = false, nil // reaped once, as wait4 reports a child once
	return m.code, gone, others
}

// fakeRouting is a routing observation with a fixed verdict and the pod's
// grace period from a given instant on.
type fakeRouting struct {
	clock     *time.Time
	verdict   drain.Routing
	grace     time.Duration
	graceFrom time.Duration // offset from which PodGracePeriod knows grace; <0: never
	ended     []drain.Status
}

func (r *fakeRouting) Routing(time.Time) drain.Routing { return r.verdict }
func (r *fakeRouting) StopRequested(time.Time)         {}
func (r *fakeRouting) PodGracePeriod() (time.Duration, bool) {
	if r.graceFrom < 0 || r.clock.Sub(t0) < r.graceFrom {
		return 0, false
	}
	return r.grace, true
}
func (r *fakeRouting) DrainEnded(st drain.Status)    { r.ended = append(r.ended, st) }
func (r *fakeRouting) Run(ctx context.Context) error { <-ctx.Done(); return nil }

// scenario drives one loop with the fake clock.
type scenario struct {
	t      *testing.T
	l      *loop
	master *fakeMaster
	clock  time.Time
	checks int // reload checks started; check n has pid 1000+n
	// The master's show proc line in the polls: its reload count and
	// [failed: N].
	reloadCount, failedCount int
}

// testSettings: grace 30s, margin 2s (deadline 28s after the stop request,
// SIGKILL of the group 1s after the hard stop), max wait 20s, quiet 2s.
var testSettings = conf.Settings{
	GracePeriod: 30 * time.Second, Margin: 2 * time.Second, MaxWait: 20 * time.Second,
	QuietPeriod: 2 * time.Second, WithdrawnQuietPeriod: 2 * time.Second, PollInterval: 100 * time.Millisecond,
	StopSignals: []syscall.Signal{syscall.SIGTERM, syscall.SIGUSR1},
}

// newScenario returns a loop whose HAProxy serves with worker 100 read at
// t0. rt may be nil (routing off).
func newScenario(t *testing.T, s conf.Settings, rt *fakeRouting) *scenario {
	sc := &scenario{t: t, clock: t0}
	sc.master = &fakeMaster{clock: &sc.clock}
	sc.l = &loop{
		log: discard, drain: drain.New(drainSettings(s, haproxy.Inspection{}, conf.RoutingOff)), board: status.NewBoard(status.Snapshot{}),
		settings: s, master: 42, proc: sc.master, stops: signalSet(s.StopSignals),
		now: func() time.Time { return sc.clock }, mode: conf.RoutingOff, reloads: newReloads(),
		startCheck: func(origin string, now time.Time) (*reloadCheck, error) {
			sc.checks++
			pid := 1000 + sc.checks
			return &reloadCheck{pid: pid, origin: origin, started: now, out: make(chan []byte, 1),
				killGroup: func() error { sc.master.record(fmt.Sprintf("KILL-CHECK-%d", pid)); return nil }}, nil
		},
	}
	if rt != nil {
		rt.clock = &sc.clock
		sc.l.routing, sc.l.mode = rt, conf.RoutingEndpointSlices
	}
	sc.poll(0, worker{pid: 100})
	return sc
}

// worker is one worker in a poll.
type worker struct {
	pid      int
	old      bool
	stopping bool
	requests uint64
}

// event hands one event to the loop at off, as run does.
func (sc *scenario) event(off time.Duration, handle func()) {
	sc.clock = t0.Add(off)
	handle()
	if !sc.l.exited {
		sc.l.step()
	}
	sc.l.publish()
}

func (sc *scenario) signal(off time.Duration, sig syscall.Signal) {
	sc.event(off, func() { sc.l.onSignal(sig) })
}

// tick is the loop's ticker: reap, then step.
func (sc *scenario) tick(off time.Duration) { sc.event(off, sc.l.reap) }

// poll is a successful poll that started and ended at off.
func (sc *scenario) poll(off time.Duration, ws ...worker) {
	o := observation{started: t0.Add(off), obs: drain.Observation{At: t0.Add(off)}}
	o.sample.Master = runtimeapi.Process{PID: 42, Role: "master", Reloads: sc.reloadCount, FailedReloads: sc.failedCount}
	for _, w := range ws {
		ws := runtimeapi.WorkerSample{
			Process: runtimeapi.Process{PID: w.pid, Old: w.old},
			Info:    runtimeapi.Info{PID: w.pid, Stopping: w.stopping},
		}
		o.sample.Workers = append(o.sample.Workers, ws)
		o.obs.Workers = append(o.obs.Workers, drain.Worker{PID: w.pid, Old: finishing(ws), Requests: w.requests, Connections: w.requests})
	}
	sc.event(off, func() { sc.l.onObservation(o) })
}

// pollFailed is a poll that started and failed at off.
func (sc *scenario) pollFailed(off time.Duration) {
	o := observation{started: t0.Add(off), obs: drain.Observation{At: t0.Add(off), Err: errors.New("connection refused")}}
	sc.event(off, func() { sc.l.onObservation(o) })
}

// exit is the master's exit with code, seen at the tick at off.
func (sc *scenario) exit(off time.Duration, code int) {
	sc.master.code, sc.master.gone = code, true
	sc.tick(off)
}

// checkDone ends the running reload check at off with code and output, as
// the reaper and the output's reader hand them to the loop.
func (sc *scenario) checkDone(off time.Duration, code int, out string) {
	sc.t.Helper()
	if sc.l.check == nil {
		sc.t.Fatalf("no reload check runs at %v", off)
	}
	sc.master.others = map[int]int{sc.l.check.pid: code}
	sc.tick(off)
	sc.event(off, func() { sc.l.onCheckOutput([]byte(out)) })
}

// wantSent fails unless the master got exactly these, in order.
func (sc *scenario) wantSent(want ...string) {
	sc.t.Helper()
	if !slices.Equal(sc.master.sent, want) {
		sc.t.Fatalf("sent to the master %q, want %q", sc.master.sent, want)
	}
}

// HAProxy 2.6 may ignore a SIGUSR1 that arrives just after its workers
// started, and every version one that follows a reload by a few ms: while a worker does
// not say Stopping 500ms after the soft stop, the soft stop is sent again,
// at most every 500ms, whether show proc lists it current or old (3.1+
// lists the worker a failed reload kept under old workers); once a poll
// shows every worker stopping nothing more is sent.
func TestLoopSoftStopRetry(t *testing.T) {
	sc := newScenario(t, testSettings, nil)
	sc.signal(sec(1), syscall.SIGTERM)
	for off := sec(1.5); off < sec(3); off += sec(0.5) {
		sc.poll(off, worker{pid: 100})
	}
	sc.wantSent()
	sc.poll(sec(3), worker{pid: 100}) // quiet since the stop request: soft stop
	sc.wantSent("SIGUSR1@3s")
	sc.poll(sec(3.4), worker{pid: 100}, worker{pid: 90, old: true, stopping: true})
	sc.wantSent("SIGUSR1@3s") // too early to tell
	sc.poll(sec(3.5), worker{pid: 100}, worker{pid: 90, old: true, stopping: true})
	sc.wantSent("SIGUSR1@3s", "SIGUSR1@3.5s")
	sc.poll(sec(3.9), worker{pid: 100})
	sc.wantSent("SIGUSR1@3s", "SIGUSR1@3.5s") // 400ms after the retry
	sc.poll(sec(4), worker{pid: 100})
	sc.wantSent("SIGUSR1@3s", "SIGUSR1@3.5s", "SIGUSR1@4s")
	sc.poll(sec(4.5), worker{pid: 100, stopping: true}, worker{pid: 90, old: true, stopping: true})
	sc.poll(sec(5), worker{pid: 100, stopping: true})
	sc.wantSent("SIGUSR1@3s", "SIGUSR1@3.5s", "SIGUSR1@4s")
}

// After a failed reload HAProxy 3.1+ lists the worker that still serves
// under old workers, not stopping. A soft stop it does not take is sent
// again like one a current worker does not take.
func TestLoopSoftStopRetryServingOldWorker(t *testing.T) {
	sc := newScenario(t, testSettings, nil)
	sc.poll(sec(0.5), worker{pid: 100, old: true}) // a failed reload
	sc.signal(sec(1), syscall.SIGTERM)
	for off := sec(1.5); off <= sec(3); off += sec(0.5) {
		sc.poll(off, worker{pid: 100, old: true})
	}
	sc.wantSent("SIGUSR1@3s")
	sc.poll(sec(3.5), worker{pid: 100, old: true})
	sc.wantSent("SIGUSR1@3s", "SIGUSR1@3.5s")
	sc.poll(sec(4), worker{pid: 100, old: true, stopping: true})
	sc.poll(sec(4.5), worker{pid: 100, old: true, stopping: true})
	sc.wantSent("SIGUSR1@3s", "SIGUSR1@3.5s")
}

// While polls fail after the soft stop (a master that re-executes, or a
// 3.2 master whose new worker still loads, drops a SIGUSR1 then), the soft
// stop is sent again every 500ms until a poll succeeds; one that shows
// every worker stopping ends the resending.
func TestLoopSoftStopResentWhilePollsFail(t *testing.T) {
	sc := newScenario(t, testSettings, nil)
	sc.signal(sec(1), syscall.SIGTERM)
	sc.poll(sec(3), worker{pid: 100})
	sc.wantSent("SIGUSR1@3s")
	sc.tick(sec(3.6)) // no poll since: nothing known to be wrong
	sc.wantSent("SIGUSR1@3s")
	sc.pollFailed(sec(3.7))
	sc.wantSent("SIGUSR1@3s", "SIGUSR1@3.7s")
	sc.pollFailed(sec(3.9))
	sc.tick(sec(4.1))
	sc.wantSent("SIGUSR1@3s", "SIGUSR1@3.7s")
	sc.tick(sec(4.2))
	sc.wantSent("SIGUSR1@3s", "SIGUSR1@3.7s", "SIGUSR1@4.2s")
	sc.poll(sec(4.3), worker{pid: 100, stopping: true})
	sc.pollFailed(sec(4.5))
	sc.tick(sec(5))
	sc.tick(sec(6))
	sc.wantSent("SIGUSR1@3s", "SIGUSR1@3.7s", "SIGUSR1@4.2s")
}

// A worker that never reports Stopping gets no soft stop after the hard
// stop: SIGTERM has replaced it.
func TestLoopNoSoftStopRetryAfterHardStop(t *testing.T) {
	s := testSettings
	s.GracePeriod, s.MaxWait = 6*time.Second, 3*time.Second // deadline 4s after the stop, bound 3s
	sc := newScenario(t, s, nil)
	sc.signal(0, syscall.SIGTERM)
	sc.poll(sec(2), worker{pid: 100})
	sc.wantSent("SIGUSR1@2s")
	sc.tick(sec(4))
	sc.poll(sec(4.5), worker{pid: 100})
	sc.poll(sec(4.9), worker{pid: 100})
	sc.wantSent("SIGUSR1@2s", "SIGTERM@4s")
}

// Clients that never pause: the soft stop at the bound (20s), the hard stop
// at the deadline (28s), and when the master is still there
// min(margin/2, 1s) later its process group is SIGKILLed, once. The
// master's exit code is the loop's.
func TestLoopKillsGroupAfterHardStop(t *testing.T) {
	sc := newScenario(t, testSettings, nil)
	sc.signal(0, syscall.SIGTERM)
	n := uint64(0)
	for off := sec(0.5); off < sec(20); off += sec(0.5) {
		n++
		sc.poll(off, worker{pid: 100, requests: n})
	}
	sc.wantSent()
	sc.tick(sec(20))
	sc.wantSent("SIGUSR1@20s")
	sc.tick(sec(27.9))
	sc.wantSent("SIGUSR1@20s")
	sc.tick(sec(28))
	sc.wantSent("SIGUSR1@20s", "SIGTERM@28s")
	sc.tick(sec(28.9))
	sc.wantSent("SIGUSR1@20s", "SIGTERM@28s")
	sc.tick(sec(29))
	sc.tick(sec(29.5))
	sc.wantSent("SIGUSR1@20s", "SIGTERM@28s", "KILL-GROUP@29s")
	sc.exit(sec(29.6), 137)
	if !sc.l.exited || sc.l.exitCode != 137 {
		t.Fatalf("exited %v code %d, want the master's 137", sc.l.exited, sc.l.exitCode)
	}
	// Workers a killed master left behind are killed too; nothing more is
	// signalled to a master that is gone.
	sc.signal(sec(30), syscall.SIGHUP)
	sc.wantSent("SIGUSR1@20s", "SIGTERM@28s", "KILL-GROUP@29s", "KILL-GROUP@29.6s")
	if ph := sc.l.board.Load().Phase; ph != drain.Exited {
		t.Errorf("published phase %s, want exited", ph)
	}
}

// A master that exits after the soft stop ends the loop with its code and
// gets no hard stop; only what it may have left behind is killed.
func TestLoopNoHardStopWhenMasterExits(t *testing.T) {
	sc := newScenario(t, testSettings, nil)
	sc.signal(0, syscall.SIGTERM)
	sc.poll(sec(2), worker{pid: 100})
	sc.exit(sec(2.5), 0)
	sc.wantSent("SIGUSR1@2s", "KILL-GROUP@2.5s")
	if !sc.l.exited || sc.l.exitCode != 0 {
		t.Errorf("exited %v code %d, want the master's 0", sc.l.exited, sc.l.exitCode)
	}
}

// A reload (SIGHUP or SIGUSR2) while draining reaches the master as SIGUSR2
// and changes nothing of the drain: the new worker starts at zero, the old
// one's counters still count, and the drain ends when both are quiet. Once
// the soft stop was sent a reload is ignored (it would start workers that
// listen again), and a second stop signal is never forwarded.
func TestLoopReloadWhileStopping(t *testing.T) {
	sc := newScenario(t, testSettings, nil)
	sc.signal(0, syscall.SIGTERM)
	sc.poll(sec(0.5), worker{pid: 100, requests: 1})
	sc.signal(sec(0.6), syscall.SIGHUP)
	sc.wantSent() // checked first
	sc.checkDone(sec(0.6), 0, "")
	sc.wantSent("SIGUSR2@600ms")
	sc.signal(sec(0.7), syscall.SIGTERM) // a second stop request
	sc.signal(sec(0.8), syscall.SIGUSR1) // a stop signal too: not forwarded
	sc.wantSent("SIGUSR2@600ms")
	sc.poll(sec(1), worker{pid: 101}, worker{pid: 100, old: true, stopping: true, requests: 2})
	sc.signal(sec(1.1), syscall.SIGUSR2)
	sc.checkDone(sec(1.1), 0, "")
	sc.wantSent("SIGUSR2@600ms", "SIGUSR2@1.1s")
	for off := sec(1.5); off < sec(3); off += sec(0.5) {
		sc.poll(off, worker{pid: 101}, worker{pid: 100, old: true, stopping: true, requests: 2})
	}
	sc.wantSent("SIGUSR2@600ms", "SIGUSR2@1.1s")
	sc.poll(sec(3), worker{pid: 101}, worker{pid: 100, old: true, stopping: true, requests: 2})
	sc.wantSent("SIGUSR2@600ms", "SIGUSR2@1.1s", "SIGUSR1@3s")
	sc.signal(sec(3.1), syscall.SIGHUP)
	sc.signal(sec(3.2), syscall.SIGUSR2)
	sc.wantSent("SIGUSR2@600ms", "SIGUSR2@1.1s", "SIGUSR1@3s")
	if sc.checks != 2 {
		t.Errorf("%d reload checks started, want 2: none once stopping", sc.checks)
	}
	if st := sc.l.board.Load().Drain; !st.StopRequested.Equal(t0) || !st.SoftStop.Equal(t0.Add(sec(3))) || st.Reason != drain.ReasonQuiet {
		t.Errorf("published drain %+v, want stop at 0, soft stop at 3s, reason quiet", st)
	}
}

// The pod's own grace period, shorter than --grace-period, moves the
// deadline to stop request + pod grace − margin and shortens the bound in
// proportion (max wait × (pod grace − margin) / (grace − margin)), whether the routing watch saw it before the stop request or during the
// drain. Routing stays pending, so the bound ends the drain.
func TestLoopPodGracePeriod(t *testing.T) {
	for _, tc := range []struct {
		name      string
		graceFrom time.Duration // when the watch sees the pod's grace period
		grace     time.Duration
		soft, ddl time.Duration // from the stop request at 1s
	}{
		{"unknown", -1, 0, sec(20), sec(28)},
		{"seen before the stop", sec(0.5), sec(20), sec(20) * 18 / 28, sec(18)},
		{"seen while draining", sec(5), sec(20), sec(20) * 18 / 28, sec(18)},
		{"longer than --grace-period", sec(0.5), sec(45), sec(20), sec(28)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt := &fakeRouting{verdict: drain.Routing{State: drain.RoutingPending}, grace: tc.grace, graceFrom: tc.graceFrom}
			sc := newScenario(t, testSettings, rt)
			stop := sec(1)
			sc.signal(stop, syscall.SIGTERM)
			for off := stop + sec(0.5); off < stop+tc.soft; off += sec(0.5) {
				sc.poll(off, worker{pid: 100})
			}
			sc.wantSent()
			if got := sc.l.board.Load().Drain.Deadline; !got.Equal(t0.Add(stop + tc.ddl)) {
				t.Errorf("published deadline %v, want %v", got.Sub(t0), stop+tc.ddl)
			}
			sc.tick(stop + tc.soft)
			soft := fmt.Sprintf("SIGUSR1@%v", stop+tc.soft)
			sc.wantSent(soft)
			if len(rt.ended) != 1 || rt.ended[0].Reason != drain.ReasonBound {
				t.Errorf("drain ends announced %+v, want one, bound", rt.ended)
			}
			sc.tick(stop + tc.ddl - sec(0.1))
			sc.wantSent(soft)
			sc.tick(stop + tc.ddl)
			sc.wantSent(soft, fmt.Sprintf("SIGTERM@%v", stop+tc.ddl))
		})
	}
}

// routingText is routing conditions that say a fixed text.
type routingText string

func (r routingText) Text() string { return string(r) }

// The published routing condition carries the verdict typed, as routing/
// gave it: status renders its detail when shown.
func TestPublishedRoutingTyped(t *testing.T) {
	why := routingText("routed here in the API: default/web (IPv4): endpoint still ready")
	rt := &fakeRouting{verdict: drain.Routing{State: drain.RoutingPending, Why: why}, graceFrom: -1}
	sc := newScenario(t, testSettings, rt)
	sc.signal(0, syscall.SIGTERM)
	sc.poll(sec(0.5), worker{pid: 100})
	conds := sc.l.board.Load().Drain.Conditions
	if len(conds) != 2 || conds[1].Name != drain.ConditionRouting {
		t.Fatalf("published conditions %+v, want quiet and routing", conds)
	}
	if r := conds[1].Routing; r == nil || r.Why != drain.RoutingConditions(why) {
		t.Fatalf("published routing %+v, want the verdict's conditions", r)
	}
	if got, want := conds[1].Text(), "pending ("+string(why)+")"; got != want {
		t.Errorf("routing detail %q, want %q", got, want)
	}
}
