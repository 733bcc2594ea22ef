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
