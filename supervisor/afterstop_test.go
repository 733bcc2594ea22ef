package supervisor

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A worker that show proc lists after the soft stop (a reload hapsuper did
// not send) gets the soft stop again at once, not after softStopRetry, and
// is recorded for status; it is recorded once.
func TestLoopWorkerAfterSoftStopStoppedAgain(t *testing.T) {
	sc := newScenario(t, testSettings, nil)
	sc.signal(sec(1), syscall.SIGTERM)
	sc.poll(sec(3), worker{pid: 100}) // quiet: soft stop
	sc.wantSent("SIGUSR1@3s")
	sc.reloadCount++
	sc.poll(sec(3.1), worker{pid: 100, old: true, stopping: true}, worker{pid: 101})
	sc.wantSent("SIGUSR1@3s", "SIGUSR1@3.1s")
	sc.poll(sec(3.2), worker{pid: 100, old: true, stopping: true}, worker{pid: 101, stopping: true})
	sc.wantSent("SIGUSR1@3s", "SIGUSR1@3.1s")
	recs := sc.l.board.Load().Drain.ReloadsAfterSoftStop
	if len(recs) != 1 || recs[0].Worker != 101 || recs[0].Action != "soft stop sent again" || !strings.Contains(recs[0].By, "unknown") ||
		time.Duration(recs[0].AfterSoftStop) != sec(0.1) {
		t.Errorf("records %+v, want worker 101 0.1s after the soft stop, by an unknown client, soft stop sent again", recs)
	}
}

// After the hard stop such a worker gets the hard stop again.
func TestLoopWorkerAfterHardStopStoppedAgain(t *testing.T) {
	sc := newScenario(t, testSettings, nil)
	sc.signal(sec(1), syscall.SIGTERM)
	for off := sec(1.5); off <= sec(29); off += sec(0.5) {
		sc.poll(off, worker{pid: 100, requests: uint64(off / time.Millisecond)}) // never quiet
	}
	sc.poll(sec(29.1), worker{pid: 100, stopping: true}, worker{pid: 102})
	sent := sc.master.sent
	if len(sent) < 2 || sent[len(sent)-1] != "SIGTERM@29.1s" {
		t.Errorf("sent %q, want the hard stop again at 29.1s", sent)
	}
	if recs := sc.l.board.Load().Drain.ReloadsAfterSoftStop; len(recs) != 1 || recs[0].Action != "hard stop sent again" {
		t.Errorf("records %+v, want one: hard stop sent again", recs)
	}
}

// A new child of the master in /proc is a worker too, seen before show
// proc lists it.
func TestLoopNewChildOfTheMasterAfterSoftStop(t *testing.T) {
	sc := newScenario(t, testSettings, nil)
	children := []int{100}
	sc.l.procs = func() ([]procStat, error) {
		var ps []procStat
		for _, c := range children {
			ps = append(ps, procStat{pid: c, ppid: 42, pgid: 42, state: 'S'})
		}
		return append(ps, procStat{pid: 7, ppid: 1, state: 'S'}), nil
	}
	sc.signal(sec(1), syscall.SIGTERM)
	sc.poll(sec(3), worker{pid: 100})
	children = append(children, 103)
	sc.tick(sec(3.2))
	sc.wantSent("SIGUSR1@3s", "SIGUSR1@3.2s")
	if recs := sc.l.board.Load().Drain.ReloadsAfterSoftStop; len(recs) != 1 || recs[0].Worker != 103 || recs[0].Via != "a new child of the master" {
		t.Errorf("records %+v, want worker 103 seen in /proc", recs)
	}
}

// hapsuper's own reloads are refused from the soft stop on, also the soft
// stop a companion's failure sends while the drain never started.
func TestLoopReloadRefusedAfterSoftStop(t *testing.T) {
	sc, _ := companionScenario(t)
	sc.companionExit(sec(2), 501, 2)
	sc.wantSent("SIGUSR1@2s")
	sc.signal(sec(2.5), syscall.SIGHUP)
	sc.signal(sec(2.6), syscall.SIGUSR2)
	if sc.checks != 0 {
		t.Errorf("%d reload checks started after the soft stop, want none", sc.checks)
	}
	sc.wantSent("SIGUSR1@2s")
}

// A check that passes once the soft stop went out is not sent.
func TestLoopCheckedReloadNotSentAfterSoftStop(t *testing.T) {
	sc, _ := companionScenario(t)
	sc.signal(sec(1), syscall.SIGHUP)
	sc.companionExit(sec(2), 501, 2)
	sc.checkDone(sec(2.5), 0, "")
	sc.wantSent("SIGUSR1@2s")
}

// The loop wakes at the companion's next start, on the loop's clock,
// however far the next tick is; and not before it.
func TestLoopWakesAtTheCompanionsNextStart(t *testing.T) {
	s := testSettings
	s.PollInterval = time.Hour // no tick comes
	sc, _ := companionScenario(t)
	sc.l.settings = s
	sc.companionExit(sec(2), 501, 0) // next start at 2.5s
	base, from := time.Now(), sc.clock
	sc.l.now = func() time.Time { return from.Add(time.Since(base)) }
	c := sc.l.companion
	started := make(chan time.Time, 1)
	start := c.start
	c.start = func(path string, argv, env []string, out *os.File, sys *syscall.SysProcAttr) (int, error) {
		started <- sc.l.now()
		return start(path, argv, env, out, sys)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc.l.run(ctx, nil, nil, nil)
	}()
	select {
	case at := <-started:
		if at.Before(t0.Add(sec(2.5))) {
			t.Errorf("started at %v, before its backoff ended at 2.5s", at.Sub(t0))
		}
	case <-time.After(10 * time.Second):
		t.Error("the companion was not started again 10s after its backoff of 500ms: the loop waits for its tick")
	}
	cancel()
	<-done
}

// Quick exits make status say the companion is failing, with its last
// output lines; a run as long as the backoff's maximum clears it.
func TestCompanionFailingStatus(t *testing.T) {
	sc, f := companionScenario(t)
	tail := &lineTail{}
	sc.l.companion.tail = tail
	for _, l := range []string{"a", "b", "c", "d", "e", "E0101 cannot reach the API\n"} {
		tail.add([]byte(l))
	}
	if st := sc.l.board.Load().Companion; st.Failing != "" {
		t.Errorf("failing %q before any exit", st.Failing)
	}
	sc.companionExit(sec(0.02), 501, 0)
	sc.tick(sec(0.52))
	sc.companionExit(sec(0.54), 502, 0)
	st := sc.l.board.Load().Companion
	if st.Failing != "2 quick exits in a row, the last 0 after 20ms" {
		t.Errorf("failing %q, want 2 quick exits", st.Failing)
	}
	if want := []string{"b", "c", "d", "e", "E0101 cannot reach the API"}; strings.Join(st.Output, "|") != strings.Join(want, "|") {
		t.Errorf("output %q, want the last %d lines %q", st.Output, companionTailLines, want)
	}
	sc.tick(sec(1.54))
	sc.tick(sec(5.54)) // ran 4s, the backoff's maximum
	if st := sc.l.board.Load().Companion; st.Failing != "" || st.State != companionRunning {
		t.Errorf("companion %s failing %q after a run of the backoff's maximum, want running and not failing", st.State, st.Failing)
	}
	f.want(t, "start-501@0s", "start-502@520ms", "start-503@1.54s")
}

// Polls failing for longer than a moment while HAProxy serves are logged
// at WARN once, and their end at INFO; a short failure (a master that
// re-executes) is not.
func TestLoopMasterCLILost(t *testing.T) {
	sc := newScenario(t, testSettings, nil)
	var out bytes.Buffer
	sc.l.log = slog.New(slog.NewTextHandler(&out, nil))
	sc.pollFailed(sec(1))
	sc.poll(sec(1.1), worker{pid: 100})
	for off := sec(2); off <= sec(6); off += sec(1) {
		sc.pollFailed(off)
	}
	sc.poll(sec(7), worker{pid: 100})
	logs := out.String()
	if n := strings.Count(logs, "master CLI lost"); n != 1 || !strings.Contains(logs, "level=WARN") {
		t.Errorf("%d WARN lines of the master CLI lost, want 1:\n%s", n, logs)
	}
	if !strings.Contains(logs, `level=INFO msg="master CLI answers again" failing_s=5`) {
		t.Errorf("no recovery line:\n%s", logs)
	}
	if strings.Index(logs, "master CLI lost") > strings.Index(logs, "answers again") {
		t.Errorf("recovery logged before the loss:\n%s", logs)
	}
}
