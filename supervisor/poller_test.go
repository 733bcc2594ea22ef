package supervisor

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/hapsuper/hapsuper/conf"
	"github.com/hapsuper/hapsuper/drain"
	"github.com/hapsuper/hapsuper/haproxy"
	"github.com/hapsuper/hapsuper/runtimeapi"
	"github.com/hapsuper/hapsuper/status"
)

// The poller reads fast until the loop slows it, reads at the serving
// interval while slow, and reads at once when the pace turns fast again:
// the first reading after a stop request is not left to the slow tick.
func TestPollerPace(t *testing.T) {
	pc := newPace()
	p := &poller{cli: fakeSampler{err: errors.New("no master")}, interval: 5 * time.Millisecond,
		serving: time.Hour, pace: pc.ch, now: time.Now}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := make(chan observation, 1)
	done := make(chan error, 1)
	go func() { done <- p.run(ctx, out) }()
	defer func() {
		cancel()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Error("poller did not stop within 5s of cancel")
		}
	}()
	next := func(within time.Duration) bool {
		select {
		case <-out:
			return true
		case <-time.After(within):
			return false
		}
	}
	for i := range 3 {
		if !next(5 * time.Second) {
			t.Fatalf("fast poll %d did not come within 5s", i)
		}
	}
	if !pc.set(false) {
		t.Fatal("set(false) after fast sent nothing")
	}
	// At most one poll already under way when the pace changed, then none
	// for the serving interval (an hour here).
	next(200 * time.Millisecond)
	if next(300 * time.Millisecond) {
		t.Fatal("polled while slow, before the serving interval")
	}
	if pc.set(false) {
		t.Error("a repeated set(false) sent a setting")
	}
	asked := time.Now()
	pc.set(true)
	if !next(5 * time.Second) {
		t.Fatal("no poll within 5s of the pace turning fast")
	}
	t.Logf("first poll %s after the pace turned fast", time.Since(asked))
	for i := range 3 {
		if !next(5 * time.Second) {
			t.Fatalf("fast poll %d after the switch did not come within 5s", i)
		}
	}
}

// The loop asks for slow polling only while HAProxy serves with its workers
// read, and for fast polling again at the stop request.
func TestLoopPace(t *testing.T) {
	s := conf.Settings{GracePeriod: 30 * time.Second, QuietPeriod: 2 * time.Second, MaxWait: 20 * time.Second,
		Margin: 2 * time.Second, PollInterval: 100 * time.Millisecond, StopSignals: []syscall.Signal{syscall.SIGTERM}}
	l := &loop{log: discard, drain: drain.New(drainSettings(s, haproxy.Inspection{}, conf.RoutingOff)), settings: s,
		stops: signalSet(s.StopSignals), now: time.Now, pace: newPace(), board: status.NewBoard(status.Snapshot{}), reloads: newReloads()}
	tick := time.NewTicker(time.Hour)
	defer tick.Stop()
	step := func() bool { l.setPace(l.publish(), tick); return l.pace.fast }
	if !step() {
		t.Error("slow while starting")
	}
	l.markReady("notify")
	if !step() {
		t.Error("slow while serving before any worker was read")
	}
	l.onObservation(observation{sample: runtimeapi.Sample{Workers: []runtimeapi.WorkerSample{{Process: runtimeapi.Process{PID: 7}}}},
		obs: drain.Observation{At: time.Now(), Workers: []drain.Worker{{PID: 7}}}})
	if step() {
		t.Error("fast while serving with its workers read")
	}
	l.onSignal(syscall.SIGTERM)
	if !step() {
		t.Error("slow after the stop request")
	}
}

// The poller hands the drain what judges a reload: each counted frontend's
// conn_tot (Opened), the master's reload count, the workers still loading,
// and the HTTP frontends whose requests count once withdrawn, as the last
// inspection's graceful set says.
func TestPollerObserveForReloads(t *testing.T) {
	p := &poller{now: time.Now, ignore: map[string]bool{"stats": true},
		graceful: newFrontendSet(map[string]bool{"web": true})}
	fe := func(name, mode string, stot, req, conn uint64) runtimeapi.Frontend {
		return runtimeapi.Frontend{Name: name, Mode: mode, Stot: stot, ReqTot: req, ConnTot: conn, HasConnTot: true}
	}
	s := runtimeapi.Sample{Master: runtimeapi.Process{Reloads: 3},
		Workers: []runtimeapi.WorkerSample{{Process: runtimeapi.Process{PID: 7}, Frontends: []runtimeapi.Frontend{
			fe("web", "http", 5, 9, 6), fe("api", "http", 2, 4, 2), fe("db", "tcp", 1, 0, 1), fe("stats", "http", 50, 50, 50)}}},
		Unreachable: []runtimeapi.Process{{PID: 8}}}
	o := p.observe(s, nil)
	if o.Err != nil || o.Reloads != 3 || len(o.Loading) != 1 || o.Loading[0] != 8 {
		t.Fatalf("observation %+v, want reloads 3, worker 8 loading", o)
	}
	if len(o.Ungraceful) != 1 || o.Ungraceful[0] != "api" {
		t.Errorf("Ungraceful %q, want [api]", o.Ungraceful)
	}
	w := o.Workers[0]
	if w.Opened["web"] != 6 || w.Opened["api"] != 2 || w.Opened["db"] != 1 || len(w.Opened) != 3 {
		t.Errorf("Opened %v, want web 6, api 2, db 1 (stats ignored)", w.Opened)
	}
	if w.Connections != 5+2+4+1 || w.Requests != 5+9+2+4+1 {
		t.Errorf("Connections %d Requests %d", w.Connections, w.Requests)
	}
	s.Workers[0].Frontends[0].HasConnTot = false
	if o := p.observe(s, nil); o.Workers[0].Opened != nil {
		t.Errorf("Opened %v without conn_tot, want nil: a stop line cannot be compared", o.Workers[0].Opened)
	}
}
