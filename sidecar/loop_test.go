package sidecar

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hapsuper/hapsuper/conf"
	"github.com/hapsuper/hapsuper/drain"
	"github.com/hapsuper/hapsuper/runtimeapi"
	"github.com/hapsuper/hapsuper/status"
	"github.com/hapsuper/hapsuper/supervisor"
)

// fakeRouting is routing/ as the loop sees it: a state the test sets and
// the deletion the pod watch saw.
type fakeRouting struct {
	state    drain.RoutingState
	grace    time.Duration
	deleting bool
	stopAt   time.Time
	ended    []drain.Status
}

func (f *fakeRouting) Routing(time.Time) drain.Routing { return drain.Routing{State: f.state} }
func (f *fakeRouting) StopRequested(now time.Time) {
	if f.stopAt.IsZero() {
		f.stopAt = now
	}
}
func (f *fakeRouting) PodGracePeriod() (time.Duration, bool) { return f.grace, f.deleting }
func (f *fakeRouting) DrainEnded(st drain.Status)            { f.ended = append(f.ended, st) }
func (f *fakeRouting) Run(ctx context.Context) error         { <-ctx.Done(); return nil }

// scene is a loop on a clock the test steps, with HAProxy's counters the
// test sets.
type scene struct {
	t        *testing.T
	l        *loop
	rt       *fakeRouting
	now      time.Time
	requests uint64
	stopping bool
}

func newScene(t *testing.T, rt *fakeRouting) *scene {
	t.Helper()
	s := conf.Settings{GracePeriod: 30 * time.Second, Margin: 2 * time.Second, MaxWait: 18 * time.Second,
		QuietPeriod: 2 * time.Second, PollInterval: 100 * time.Millisecond, MasterSocket: "/shared/master.sock"}
	sc := &scene{t: t, rt: rt, now: time.Date(2026, 12, 6, 3, 0, 0, 0, time.UTC)}
	mode := conf.RoutingOff
	if rt != nil {
		mode = conf.RoutingEndpointSlices
	}
	sc.l = &loop{
		log:      slog.New(slog.NewTextHandler(io.Discard, nil)),
		drain:    drain.New(supervisor.DrainSettings(s, mode)),
		settings: s,
		mode:     mode,
		publish:  func(status.Snapshot) {},
		now:      func() time.Time { return sc.now },
	}
	if rt != nil {
		sc.l.routing = rt
	}
	sc.l.started = sc.now
	sc.read() // HAProxy found
	return sc
}

// read hands the loop one successful reading at now and steps it.
func (sc *scene) read() {
	w := runtimeapi.WorkerSample{Process: runtimeapi.Process{PID: 42}, Info: runtimeapi.Info{Stopping: sc.stopping},
		Frontends: []runtimeapi.Frontend{{Name: "web", Mode: "http", Stot: sc.requests}}}
	r := supervisor.Reading{Started: sc.now, Sample: runtimeapi.Sample{Master: runtimeapi.Process{PID: 7}, Workers: []runtimeapi.WorkerSample{w}}}
	r.Observation = drain.Observation{At: sc.now, Workers: []drain.Worker{{PID: 42, Requests: sc.requests, Connections: sc.requests, Accepted: map[string]uint64{"web": sc.requests}}}}
	sc.l.onReading(r)
	sc.l.step()
}

// fail hands the loop a failed reading with err and steps it.
func (sc *scene) fail(err error) {
	sc.l.onReading(supervisor.Reading{Started: sc.now, Observation: drain.Observation{At: sc.now, Err: err}})
	sc.l.step()
}

// advance reads every 100 ms for d.
func (sc *scene) advance(d time.Duration) {
	for end := sc.now.Add(d); sc.now.Before(end); {
		sc.now = sc.now.Add(100 * time.Millisecond)
		sc.read()
	}
}

// ask is one gate request; its channel holds the answer once given.
func (sc *scene) ask() <-chan answer {
	ch := make(chan answer, 1)
	sc.l.onAsk(ask{at: sc.now, reply: ch})
	return ch
}

func answered(t *testing.T, ch <-chan answer) (answer, bool) {
	t.Helper()
	select {
	case a := <-ch:
		return a, true
	default:
		return answer{}, false
	}
}

// A request while the pod is not being deleted (a liveness restart, a
// stray GET) is answered at once, marked so that the server may read the
// pod, and changes nothing: the drain is not started.
func TestGateNotDeletingAnswersAtOnce(t *testing.T) {
	rt := &fakeRouting{state: drain.RoutingPending}
	sc := newScene(t, rt)
	a, ok := answered(t, sc.ask())
	if !ok || !a.notDeleting {
		t.Fatalf("answer %+v (given %v), want at once and notDeleting", a, ok)
	}
	sc.advance(time.Second)
	if ph := sc.l.drain.Status(sc.now).Phase; ph != drain.Serving {
		t.Errorf("phase %s after a gate request while not deleting, want serving", ph)
	}
	if !rt.stopAt.IsZero() {
		t.Error("routing was told of a stop")
	}
}

// While the pod is being deleted the request is held until the drain ends:
// routing withdrawn and quiet. Then every held request is answered with
// the reason, and later ones at once.
func TestGateHeldUntilRoutedAway(t *testing.T) {
	rt := &fakeRouting{state: drain.RoutingPending}
	sc := newScene(t, rt)
	rt.deleting, rt.grace = true, 30*time.Second
	sc.advance(100 * time.Millisecond)
	first, second := sc.ask(), sc.ask()
	for range 30 { // 3 s of traffic while routing is pending
		sc.requests++
		sc.advance(100 * time.Millisecond)
	}
	if _, ok := answered(t, first); ok {
		t.Fatal("answered while routing was pending")
	}
	rt.state = drain.RoutingWithdrawn
	withdrawn := sc.now
	for range 100 {
		sc.advance(100 * time.Millisecond)
		if a, ok := answered(t, first); ok {
			if !strings.Contains(a.text, "routed-away") {
				t.Errorf("answer %q, want routed-away", a.text)
			}
			if got := sc.now.Sub(withdrawn); got < 2*time.Second {
				t.Errorf("answered %v after the withdrawal, before the quiet period (2s)", got)
			}
			if b, ok := answered(t, second); !ok || b.text != a.text {
				t.Errorf("second held request: %+v (given %v), want the same answer", b, ok)
			}
			if c, ok := answered(t, sc.ask()); !ok || c.text != a.text {
				t.Errorf("a request after the gate opened: %+v (given %v), want at once", c, ok)
			}
			if len(rt.ended) != 1 || rt.ended[0].Reason != drain.ReasonRoutedAway {
				t.Errorf("drain ends announced: %+v, want one routed-away", rt.ended)
			}
			return
		}
	}
	t.Fatal("never answered after the withdrawal")
}

// With routing pending for good the gate opens at the bound, which leaves
// the kubelet's stop signal what it gives after a hook: grace − ⌊hook
// seconds⌋, here more than the margin.
func TestGateOpensAtBound(t *testing.T) {
	for _, grace := range []time.Duration{30 * time.Second, 10 * time.Second} {
		t.Run(fmt.Sprint(grace), func(t *testing.T) {
			rt := &fakeRouting{state: drain.RoutingPending, deleting: true, grace: grace}
			sc := newScene(t, rt)
			sc.advance(100 * time.Millisecond)
			asked := sc.now
			ch := sc.ask()
			for range 400 {
				sc.advance(100 * time.Millisecond)
				if a, ok := answered(t, ch); ok {
					held := sc.now.Sub(asked)
					left := grace - held.Truncate(time.Second)
					if !strings.Contains(a.text, "bound") {
						t.Errorf("answer %q, want bound", a.text)
					}
					if left < sc.l.settings.Margin || left < 2*time.Second {
						t.Errorf("held %v of a %v grace period: the stop signal gets %v", held, grace, left)
					}
					t.Logf("grace %v: held %v, the soft stop gets %v", grace, held, left)
					return
				}
			}
			t.Fatal("never answered")
		})
	}
}

// Once deleting, a master CLI that refuses for goneAfter means HAProxy is
// gone: the loop exits and answers what it still held. A refusal shorter
// than that (a reload) is not.
func TestHAProxyGone(t *testing.T) {
	rt := &fakeRouting{state: drain.RoutingPending, deleting: true, grace: 30 * time.Second}
	sc := newScene(t, rt)
	sc.advance(100 * time.Millisecond)
	ch := sc.ask()
	refused := fmt.Errorf("connect to master CLI: %w", syscall.ECONNREFUSED)
	for range 5 {
		sc.now = sc.now.Add(100 * time.Millisecond)
		sc.fail(refused)
	}
	sc.advance(100 * time.Millisecond)
	if sc.l.exited {
		t.Fatal("exited after a refusal of 0.5 s")
	}
	for i := 0; i < 20 && !sc.l.exited; i++ {
		sc.now = sc.now.Add(100 * time.Millisecond)
		sc.fail(refused)
	}
	if !sc.l.exited {
		t.Fatal("not exited after refusals of 2 s")
	}
	if _, ok := answered(t, ch); !ok {
		t.Error("a held request was not answered at the exit")
	}
	if ph := sc.l.drain.Status(sc.now).Phase; ph != drain.Exited {
		t.Errorf("phase %s, want exited", ph)
	}
}

// Before a deletion a missing master CLI is only waited for: HAProxy has
// not started yet, or a liveness restart is under way.
func TestMissingMasterCLIWaitedFor(t *testing.T) {
	sc := newScene(t, &fakeRouting{state: drain.RoutingPending})
	for range 50 {
		sc.now = sc.now.Add(100 * time.Millisecond)
		sc.fail(fmt.Errorf("connect: %w", syscall.ENOENT))
	}
	if sc.l.exited {
		t.Error("exited while the pod is not being deleted")
	}
}

// The stop signal (the kubelet stops a sidecar after the other containers)
// answers what is held and ends the loop; other signals change nothing.
func TestStopSignal(t *testing.T) {
	sc := newScene(t, nil) // routing off: a request is a stop
	ch := sc.ask()
	sc.l.onSignal(syscall.SIGHUP)
	if sc.l.exited {
		t.Fatal("SIGHUP ended the loop")
	}
	if _, ok := answered(t, ch); ok {
		t.Fatal("SIGHUP answered the held request")
	}
	sc.l.onSignal(syscall.SIGTERM)
	if !sc.l.exited {
		t.Fatal("SIGTERM did not end the loop")
	}
	if _, ok := answered(t, ch); !ok {
		t.Error("SIGTERM left the held request unanswered")
	}
}

// HAProxy gone while the pod is not being deleted (a liveness restart) is
// waited out: the loop keeps running, logs the loss once and HAProxy's
// return, and the drain does not start.
func TestRestartWaitedOut(t *testing.T) {
	var logs strings.Builder
	sc := newScene(t, &fakeRouting{state: drain.RoutingPending})
	sc.l.log = slog.New(slog.NewTextHandler(&logs, nil))
	refused := fmt.Errorf("connect: %w", syscall.ECONNREFUSED)
	for range 30 {
		sc.now = sc.now.Add(100 * time.Millisecond)
		sc.fail(refused)
	}
	sc.advance(time.Second)
	if sc.l.exited {
		t.Fatal("exited on a restart while the pod is not being deleted")
	}
	if ph := sc.l.drain.Status(sc.now).Phase; ph != drain.Serving {
		t.Errorf("phase %s after a restart, want serving", ph)
	}
	out := logs.String()
	if strings.Count(out, "haproxy gone while the pod is not being deleted") != 1 || strings.Count(out, "haproxy found again") != 1 {
		t.Errorf("want one loss and one return logged; log:\n%s", out)
	}
}

// With an s6 soft stop (--s6-service) the drain's end sends it once, and
// the gate holds, old and new requests alike, until HAProxy is gone; a
// failing s6 opens the gate at once, for the stop signal to decide.
func TestS6SoftStopHoldsUntilGone(t *testing.T) {
	rt := &fakeRouting{state: drain.RoutingWithdrawn, deleting: true, grace: 30 * time.Second}
	sc := newScene(t, rt)
	sent := 0
	sc.l.s6SoftStop = func() error { sent++; return nil }
	first := sc.ask()
	sc.advance(5 * time.Second) // quiet: the drain ends
	if sent != 1 {
		t.Fatalf("s6 soft stops sent: %d, want 1", sent)
	}
	if _, ok := answered(t, first); ok {
		t.Fatal("the gate opened at the s6 soft stop, before HAProxy was gone")
	}
	second := sc.ask()
	refused := fmt.Errorf("connect: %w", syscall.ECONNREFUSED)
	for i := 0; i < 20 && !sc.l.exited; i++ {
		sc.now = sc.now.Add(100 * time.Millisecond)
		sc.fail(refused)
	}
	for _, ch := range []<-chan answer{first, second} {
		if a, ok := answered(t, ch); !ok || !strings.Contains(a.text, "gone") {
			t.Errorf("answer %+v (given %v), want one once HAProxy is gone", a, ok)
		}
	}

	sc = newScene(t, &fakeRouting{state: drain.RoutingWithdrawn, deleting: true, grace: 30 * time.Second})
	sc.l.s6SoftStop = func() error { return fmt.Errorf("open s6 control: %w", syscall.ENXIO) }
	held := sc.ask()
	sc.advance(5 * time.Second)
	if _, ok := answered(t, held); !ok {
		t.Error("a failed s6 soft stop left the gate shut")
	}
}
