package supervisor

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hapsuper/hapsuper/conf"
	"github.com/hapsuper/hapsuper/haproxy"
	"github.com/hapsuper/hapsuper/status"
)

// The companion's restart delay: the initial one after the first exit,
// doubled after each run shorter than the maximum, capped there; a run of
// the maximum or more starts over.
func TestCompanionBackoff(t *testing.T) {
	b := backoff{initial: 500 * time.Millisecond, max: 4 * time.Second}
	var got []time.Duration
	for _, ran := range []time.Duration{time.Second, time.Second, 0, 3 * time.Second, time.Second, time.Second, 4 * time.Second, time.Second} {
		got = append(got, b.next(ran))
	}
	want := []time.Duration{sec(0.5), sec(1), sec(2), sec(4), sec(4), sec(4), sec(0.5), sec(1)}
	if !slices.Equal(got, want) {
		t.Errorf("delays %v, want %v", got, want)
	}
}

// fakeCompanion records what was done to the companion's process and its
// tree, with the scenario's clock offsets; its pids count up from 500.
// Signals are recorded with the tree's pids then ("SIGTERM-501+601@3s"),
// when it had any.
type fakeCompanion struct {
	clock *time.Time
	did   []string // "start-500@1s", "SIGTERM-500@3s"
	pid   int
	fail  error // the next start's error
	tree  []int // the tree's processes: the companion and its helpers
	// stubborn: helpers survive SIGKILL (a process in D state).
	stubborn bool
}

func (f *fakeCompanion) attach(c *companion) *companion {
	c.start = func(string, []string, []string, *os.File, *syscall.SysProcAttr) (int, error) {
		if err := f.fail; err != nil {
			f.fail = nil
			return 0, err
		}
		f.pid++
		f.did = append(f.did, fmt.Sprintf("start-%d@%v", 500+f.pid, f.clock.Sub(t0)))
		return 500 + f.pid, nil
	}
	c.tree = &fakeTree{f: f}
	return c
}

// helper adds a helper process to the companion's tree.
func (f *fakeCompanion) helper(pid int) { f.tree = append(f.tree, pid) }

// gone takes pid out of the tree: it exited and was reaped.
func (f *fakeCompanion) gone(pid int) {
	f.tree = slices.DeleteFunc(f.tree, func(p int) bool { return p == pid })
}

// fakeTree is the companion's tree as fakeCompanion keeps it: SIGKILL
// ends the helpers at once (unless stubborn); the companion itself ends
// when the scenario says it exited.
type fakeTree struct{ f *fakeCompanion }

func (t *fakeTree) way() string                  { return "fake" }
func (t *fakeTree) prepare(*syscall.SysProcAttr) {}
func (t *fakeTree) started(pid int)              { t.f.tree = append(t.f.tree, pid) }
func (t *fakeTree) members() ([]int, error)      { return slices.Clone(t.f.tree), nil }
func (t *fakeTree) close() error                 { return nil }

func (t *fakeTree) signal(sig syscall.Signal) ([]int, error) {
	f := t.f
	pids := slices.Clone(f.tree)
	if len(pids) == 0 {
		return nil, nil
	}
	var names []string
	for _, p := range pids {
		names = append(names, fmt.Sprint(p))
	}
	f.did = append(f.did, fmt.Sprintf("%s-%s@%v", conf.SignalName(sig), strings.Join(names, "+"), f.clock.Sub(t0)))
	if sig == syscall.SIGKILL && !f.stubborn {
		f.tree = slices.DeleteFunc(f.tree, func(p int) bool { return p < 500 || p > 500+f.pid })
	}
	return pids, nil
}

// companionScenario is a loop scenario with a companion whose kill delay is
// 1s and backoff 500ms up to 4s, started at HAProxy's readiness (t0).
func companionScenario(t *testing.T) (*scenario, *fakeCompanion) {
	s := testSettings
	s.Companion, s.CompanionKillDelay = "/ctl", time.Second
	sc := newScenario(t, s, nil)
	f := &fakeCompanion{clock: &sc.clock}
	sc.l.companion = f.attach(newCompanion("/ctl", []string{"--a"}, nil, nil, time.Second, 500*time.Millisecond, 4*time.Second, discard))
	sc.event(0, sc.l.startCompanion)
	return sc, f
}

// companionExit is the companion's exit with code, seen at the tick at off.
func (sc *scenario) companionExit(off time.Duration, pid, code int) {
	if f, ok := sc.l.companion.tree.(*fakeTree); ok {
		f.f.gone(pid)
	}
	sc.master.others = map[int]int{pid: code}
	sc.tick(off)
}

func (f *fakeCompanion) want(t *testing.T, want ...string) {
	t.Helper()
	if !slices.Equal(f.did, want) {
		t.Fatalf("done to the companion %q, want %q", f.did, want)
	}
}

// Exits 0 and by a signal start the companion again after its backoff, on
// the loop's ticks, HAProxy untouched; status shows the restarts and the
// last exit.
func TestCompanionRestartedAfterExit0AndSignal(t *testing.T) {
	sc, f := companionScenario(t)
	sc.companionExit(sec(2), 501, 0)
	sc.tick(sec(2.4))
	sc.tick(sec(2.5))
	sc.companionExit(sec(3), 502, 128+int(syscall.SIGKILL))
	sc.tick(sec(3.9))
	sc.tick(sec(4))
	f.want(t, "start-501@0s", "start-502@2.5s", "start-503@4s")
	sc.wantSent()
	st := sc.l.board.Load().Companion
	if st == nil || st.State != companionRunning || st.Restarts != 2 || st.LastExit == nil || *st.LastExit != 137 || st.PID != 503 {
		t.Errorf("status %+v, want running pid 503, 2 restarts, last exit 137", st)
	}
}

// Any other code soft-stops HAProxy at once and becomes hapsuper's exit
// code; the companion is not started again.
func TestCompanionFailureSoftStopsAndExitsWithItsCode(t *testing.T) {
	sc, f := companionScenario(t)
	sc.companionExit(sec(2), 501, 2)
	sc.wantSent("SIGUSR1@2s")
	sc.tick(sec(5))
	sc.exit(sec(6), 0)
	f.want(t, "start-501@0s")
	if !sc.l.exited || sc.l.exitCode != 2 {
		t.Errorf("exited %v with %d, want the companion's 2", sc.l.exited, sc.l.exitCode)
	}
}

// A companion that does not exit after the soft stop's failure is bounded
// by the stop budget: the hard stop comes grace − margin later.
func TestCompanionFailureHardStopAtTheBudget(t *testing.T) {
	sc, _ := companionScenario(t)
	sc.companionExit(sec(2), 501, 3)
	sc.tick(sec(29.9))
	sc.tick(sec(30))
	sc.wantSent("SIGUSR1@2s", "SIGTERM@30s")
}

// The drain's end stops the companion first (SIGTERM to its group); the
// soft stop goes out once it is reaped, and it is not started again.
func TestCompanionStoppedBeforeTheSoftStop(t *testing.T) {
	sc, f := companionScenario(t)
	sc.signal(sec(1), syscall.SIGTERM)
	sc.poll(sec(1.1), worker{pid: 100})
	sc.poll(sec(3.2), worker{pid: 100}) // quiet: the drain ends
	f.want(t, "start-501@0s", "SIGTERM-501@3.2s")
	sc.wantSent()
	sc.tick(sec(3.5))
	sc.wantSent()
	sc.companionExit(sec(3.6), 501, 0)
	sc.wantSent("SIGUSR1@3.6s")
	sc.tick(sec(10))
	f.want(t, "start-501@0s", "SIGTERM-501@3.2s")
	if st := sc.l.board.Load().Companion; st.State != companionStopped {
		t.Errorf("companion %s, want stopped", st.State)
	}
}

// A companion that ignores SIGTERM gets SIGKILL after its kill delay; the
// soft stop follows its reaping.
func TestCompanionKilledAfterItsKillDelay(t *testing.T) {
	sc, f := companionScenario(t)
	sc.signal(sec(1), syscall.SIGTERM)
	sc.poll(sec(1.1), worker{pid: 100})
	sc.poll(sec(3.2), worker{pid: 100})
	sc.tick(sec(4.1))
	sc.tick(sec(4.2))
	f.want(t, "start-501@0s", "SIGTERM-501@3.2s", "SIGKILL-501@4.2s")
	sc.wantSent()
	sc.companionExit(sec(4.25), 501, 137)
	sc.wantSent("SIGUSR1@4.25s")
}

// The kill delay is taken from the drain's share: the bound comes that
// much earlier, so the soft stop still comes by --max-wait.
func TestCompanionKillDelayFromTheDrainShare(t *testing.T) {
	s := testSettings
	without := drainSettings(s, haproxy.Inspection{}, conf.RoutingOff).MaxWait
	s.Companion, s.CompanionKillDelay = "/ctl", 4*time.Second
	if with := drainSettings(s, haproxy.Inspection{}, conf.RoutingOff).MaxWait; with != without-4*time.Second {
		t.Errorf("drain's max wait %v with a 4s kill delay, %v without: want 4s less", with, without)
	}
}

// HAProxy's exit ends the companion: SIGTERM to its group, SIGKILL after
// its kill delay when it is still there, reaped before hapsuper exits with
// HAProxy's code.
func TestCompanionEndsWithHAProxy(t *testing.T) {
	sc, f := companionScenario(t)
	sc.l.companion.tree = &killedTree{fakeTree{f}, sc}
	sc.exit(sec(2), 3)
	f.want(t, "start-501@0s", "SIGTERM-501@2s", "SIGKILL-501@2s")
	if st := sc.l.companion.status(sc.clock); st.State != companionStopped || st.LastExit == nil || *st.LastExit != 137 {
		t.Errorf("companion %+v, want stopped after SIGKILL", st)
	}
	if sc.l.exitCode != 3 {
		t.Errorf("exit code %d, want HAProxy's 3", sc.l.exitCode)
	}
}

// killedTree is a fakeTree whose SIGKILL ends the companion too, collected
// by the next reap.
type killedTree struct {
	fakeTree
	sc *scenario
}

func (t *killedTree) signal(sig syscall.Signal) ([]int, error) {
	pids, err := t.fakeTree.signal(sig)
	if sig == syscall.SIGKILL {
		for _, p := range pids {
			t.f.gone(p)
			t.sc.master.others = map[int]int{p: 128 + int(sig)} // the next reap collects it
		}
	}
	return pids, err
}

// A companion waits for HAProxy's readiness and for the master CLI's first
// sample: readiness by notify comes before it, and a controller that
// reloads as it starts would otherwise reload into the reload count's
// baseline, unseen. Its reload is then followed to the new worker.
func TestCompanionStartsAfterTheFirstSample(t *testing.T) {
	sc := newScenario(t, testSettings, nil)
	sc.l.ready, sc.l.reloads = false, newReloads() // as before any poll
	f := &fakeCompanion{clock: &sc.clock}
	sc.l.companion = f.attach(newCompanion("/ctl", nil, nil, nil, time.Second, 500*time.Millisecond, 4*time.Second, discard))
	sc.event(sec(0.1), func() { sc.l.onNotify(notifyReady) })
	f.want(t)
	sc.poll(sec(0.2), worker{pid: 100})
	f.want(t, "start-501@200ms")
	sc.reloadCount++ // the controller's reload over the master CLI
	sc.poll(sec(0.5), worker{pid: 100, old: true}, worker{pid: 101})
	if r := sc.wantReloads(1, 0, 0, status.ReloadOK, ""); r.Origin != "master CLI" || r.Worker != 101 {
		t.Errorf("reload %+v, want the controller's (master CLI) ended by worker 101", r)
	}
}
