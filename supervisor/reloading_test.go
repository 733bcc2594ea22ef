package supervisor

import (
	"errors"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/hapsuper/hapsuper/runtimeapi"
)

// A failed poll is HAProxy reloading while the master runs and a reload
// was seen within reloadTimeout: the master's reload count moved between
// two successful polls, or the loop marked one (RELOADING=1). Without
// such a reload, past reloadTimeout, or with the master not running, it
// is a plain failure.
func TestPollerFailedPollWhileReloading(t *testing.T) {
	t0 := time.Unix(100, 0)
	now := t0
	running := true
	p := &poller{now: func() time.Time { return now }, seen: &reloadSeen{}, running: func() bool { return running }}
	sample := func(reloads int) runtimeapi.Sample {
		return runtimeapi.Sample{Master: runtimeapi.Process{PID: 1, Role: "master", Reloads: reloads}}
	}
	refused := errors.New("connect to master CLI: connection refused")
	step := func(d time.Duration, s runtimeapi.Sample, err error) bool {
		now = t0.Add(d)
		return p.observe(s, err).Reloading
	}

	if step(0, sample(3), nil) {
		t.Fatal("a successful poll is marked reloading")
	}
	if step(100*time.Millisecond, runtimeapi.Sample{}, refused) {
		t.Fatal("a failed poll with no reload seen is marked reloading")
	}
	step(200*time.Millisecond, sample(3), nil) // the count did not move
	if step(300*time.Millisecond, runtimeapi.Sample{}, refused) {
		t.Fatal("a failed poll after a sample whose reload count did not move is marked reloading")
	}
	step(time.Second, sample(5), nil) // moved: a reload seen at 1 s
	if !step(1100*time.Millisecond, runtimeapi.Sample{}, refused) {
		t.Fatal("a failed poll right after a reload was seen is not marked reloading")
	}
	if !step(time.Second+reloadTimeout, runtimeapi.Sample{}, refused) {
		t.Fatalf("a failed poll %s after the reload seen is not marked reloading", reloadTimeout)
	}
	if step(time.Second+reloadTimeout+time.Millisecond, runtimeapi.Sample{}, refused) {
		t.Fatalf("a failed poll more than %s after the last reload seen is marked reloading", reloadTimeout)
	}
	p.seen.mark(t0.Add(12 * time.Second)) // RELOADING=1, marked by the loop
	if !step(13*time.Second, runtimeapi.Sample{}, refused) {
		t.Fatal("a failed poll a second after RELOADING=1 is not marked reloading")
	}
	running = false
	if step(13100*time.Millisecond, runtimeapi.Sample{}, refused) {
		t.Fatal("a failed poll while the master does not run is marked reloading")
	}
	running = true
	// A worker that answered before and is unreachable now fails the
	// observation; during a reload that is reloading too.
	ws := sample(6)
	ws.Workers = []runtimeapi.WorkerSample{{Process: runtimeapi.Process{PID: 7}}}
	step(14*time.Second, ws, nil)
	ws.Workers, ws.Unreachable = nil, []runtimeapi.Process{{PID: 7}}
	now = t0.Add(14100 * time.Millisecond)
	if o := p.observe(ws, nil); o.Err == nil || !o.Reloading {
		t.Fatalf("a worker unreachable after a reload: %+v, want a failed observation marked reloading", o)
	}

	var zero poller // the poller of a test that knows no master
	zero.now = time.Now
	if zero.observe(runtimeapi.Sample{}, refused).Reloading {
		t.Fatal("a poller without a master marks a failed poll reloading")
	}
}

// reloadSeen keeps the latest mark, from whichever goroutine it comes.
func TestReloadSeenKeepsTheLatest(t *testing.T) {
	t0 := time.Unix(100, 0)
	var r reloadSeen
	if r.within(t0, time.Hour) {
		t.Fatal("a reload seen before any mark")
	}
	r.mark(t0.Add(2 * time.Second))
	r.mark(t0.Add(time.Second)) // older: ignored
	if r.within(t0.Add(2500*time.Millisecond), 400*time.Millisecond) {
		t.Fatal("the older mark replaced the newer one")
	}
	if !r.within(t0.Add(2500*time.Millisecond), 500*time.Millisecond) {
		t.Fatal("the newer mark was lost")
	}
	var none *reloadSeen
	none.mark(t0)
	if none.within(t0, time.Hour) {
		t.Fatal("a nil reloadSeen saw a reload")
	}
}

// processRunning tells a running process from a stopped one, a zombie and
// none.
func TestProcessRunning(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Skipf("no sleep to run: %v", err)
	}
	pid := cmd.Process.Pid
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	waitState := func(want bool, what string) {
		t.Helper()
		for end := time.Now().Add(5 * time.Second); processRunning(pid) != want; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(end) {
				t.Fatalf("processRunning(%s) = %v 5 s on, want %v", what, !want, want)
			}
		}
	}
	waitState(true, "a sleeping process")
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	waitState(false, "a stopped process")
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	waitState(true, "a continued process")
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitState(false, "a zombie") // not reaped until the cleanup
	if processRunning(1 << 30) {
		t.Error("processRunning of a pid that cannot exist = true")
	}
}
