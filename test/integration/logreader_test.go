package integration

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hapsuper/hapsuper/test/harness"
)

// TestLogReader_Gone: the reader of hapsuper's stderr goes away (a log
// shipper restarted, `kubectl logs -f` piped into a pager that quit) once
// HAProxy serves. The next log line must not kill PID 1 with SIGPIPE: the
// stop signal still starts a drain, which ends by itself, and hapsuper
// exits 0 with no HAProxy left, while a client sending until then sees no
// failure.
func TestLogReader_Gone(t *testing.T) {
	eachHAProxy(t, func(t *testing.T, h haproxyVersion) {
		p := startOnPipe(t, h, fast.flags())
		// Read until HAProxy serves, then close the read end.
		ready := make(chan bool, 1)
		go func() {
			sc := bufio.NewScanner(p.r)
			for sc.Scan() {
				if strings.Contains(sc.Text(), `"msg":"haproxy ready"`) {
					ready <- true
					return
				}
			}
			ready <- false
		}()
		select {
		case ok := <-ready:
			if !ok {
				t.Fatal("hapsuper's output ended before HAProxy was ready")
			}
		case <-time.After(10 * time.Second):
			t.Fatal("HAProxy not ready 10 s after the start")
		}
		p.r.Close()
		code, took := p.drainAndExit(fast)
		if code != 0 {
			t.Errorf("exit code %d %s after SIGTERM, want 0 (141 is SIGPIPE)", code, took)
		}
	})
}

// TestLogReader_Stalled: the reader of hapsuper's stderr stops reading
// (the pipe, shrunk to one page, is full): neither hapsuper's log nor
// HAProxy's own stderr lines, which hapsuper relays, may block the drain.
// hapsuper serves, drains on SIGTERM and exits 0 before the deadline, with
// a client seeing no failure.
func TestLogReader_Stalled(t *testing.T) {
	eachHAProxy(t, func(t *testing.T, h haproxyVersion) {
		b := fast
		p := startOnPipe(t, h, append(b.flags(), "--log-level", "debug"))
		waitListening(t, p.cfg.webAddr(), 10*time.Second)
		s := &supervisor{t: t, dir: p.dir, master: filepath.Join(p.dir, "master.sock"), status: filepath.Join(p.dir, "status.sock")}
		s.waitWorkers()
		code, took := p.drainAndExit(b)
		if code != 0 {
			t.Errorf("exit code %d, want 0", code)
		}
		if took > b.deadline() {
			t.Errorf("exit %s after SIGTERM, past the deadline %s: the drain did not end by itself", took, b.deadline())
		}
	})
}

// onPipe is hapsuper with its stdout and stderr on a pipe whose read end
// (r) the test holds: shrunk to one page, and read only if the test does.
type onPipe struct {
	t    *testing.T
	dir  string
	cfg  haproxyConfig
	cmd  *exec.Cmd
	r    *os.File
	done chan struct{} // closed once hapsuper was waited for
}

func startOnPipe(t *testing.T, h haproxyVersion, flags []string) *onPipe {
	t.Helper()
	p := &onPipe{t: t, dir: t.TempDir(), cfg: newConfig(t), done: make(chan struct{})}
	args := supervisorArgs(p.dir, flags, h.command(t, p.dir), "-f", p.cfg.write(t, p.dir))
	p.cmd = exec.Command(hapsuperBin(t), args...)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	p.r = r
	t.Cleanup(func() { r.Close() })
	if _, err := unix.FcntlInt(w.Fd(), unix.F_SETPIPE_SZ, 4096); err != nil {
		t.Fatalf("shrink the pipe: %v", err)
	}
	p.cmd.Stdout, p.cmd.Stderr = w, w
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
		killLeftovers(t, p.dir)
	})
	return p
}

// drainAndExit runs a client for a second around SIGTERM, waits for
// hapsuper's exit (the test fails past the budget), and checks that the
// client saw no failure and no HAProxy is left. It returns the exit code
// and the time from SIGTERM to the exit.
func (p *onPipe) drainAndExit(b budget) (int, time.Duration) {
	t := p.t
	t.Helper()
	waitListening(t, p.cfg.webAddr(), 5*time.Second)
	cont := startContinuous(t, p.cfg.webAddr(), 20*time.Millisecond, 20*time.Second)
	time.Sleep(500 * time.Millisecond)
	term := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	cont.stop()
	select {
	case <-p.done:
	case <-time.After(b.exitLimit() + 2*time.Second):
		t.Fatalf("hapsuper still runs %s after SIGTERM", time.Since(term))
	}
	code, took := harness.ExitCode(p.cmd.ProcessState), time.Since(term)
	t.Logf("exit %d %s after SIGTERM; %s", code, took, cont.rec.summary())
	checkNoFailures(t, cont.rec)
	checkNoHAProxyLeft(t, p.dir)
	return code, took
}
