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
		dir := t.TempDir()
		cfg := newConfig(t)
		args := supervisorArgs(dir, fast.flags(), h.command(t, dir), "-f", cfg.write(t, dir))
		cmd := exec.Command(hapsuperBin(t), args...)
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stdout, cmd.Stderr = w, w
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		w.Close()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			<-done
			killLeftovers(t, dir)
		})

		// Read until HAProxy serves, then close the read end.
		ready := make(chan bool, 1)
		go func() {
			sc := bufio.NewScanner(r)
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
		r.Close()
		waitListening(t, cfg.webAddr(), 5*time.Second)

		cont := startContinuous(t, cfg.webAddr(), 20*time.Millisecond, 20*time.Second)
		time.Sleep(500 * time.Millisecond)
		term := time.Now()
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		time.Sleep(500 * time.Millisecond)
		cont.stop()
		select {
		case <-done:
		case <-time.After(fast.exitLimit() + 2*time.Second):
			t.Fatalf("hapsuper still runs %s after SIGTERM with its log reader gone", time.Since(term))
		}
		code := harness.ExitCode(cmd.ProcessState)
		t.Logf("exit %d %s after SIGTERM; %s", code, time.Since(term), cont.rec.summary())
		if code != 0 {
			t.Errorf("exit code %d, want 0 (141 is SIGPIPE)", code)
		}
		checkNoFailures(t, cont.rec)
		checkNoHAProxyLeft(t, dir)
	})
}

// TestLogReader_Stalled: the reader of hapsuper's stderr stops reading
// (the pipe, shrunk to one page, is full): neither hapsuper's log nor
// HAProxy's own stderr lines, which hapsuper relays, may block the drain.
// hapsuper serves, drains on SIGTERM and exits 0 within the budget, with
// a client seeing no failure.
func TestLogReader_Stalled(t *testing.T) {
	eachHAProxy(t, func(t *testing.T, h haproxyVersion) {
		b := fast
		dir := t.TempDir()
		cfg := newConfig(t)
		args := supervisorArgs(dir, append(b.flags(), "--log-level", "debug"), h.command(t, dir), "-f", cfg.write(t, dir))
		cmd := exec.Command(hapsuperBin(t), args...)
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close() // never read
		if _, err := unix.FcntlInt(w.Fd(), unix.F_SETPIPE_SZ, 4096); err != nil {
			t.Fatalf("shrink the pipe: %v", err)
		}
		cmd.Stdout, cmd.Stderr = w, w
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		w.Close()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			<-done
			killLeftovers(t, dir)
		})
		waitListening(t, cfg.webAddr(), 10*time.Second)
		s := &supervisor{t: t, dir: dir, master: filepath.Join(dir, "master.sock"), status: filepath.Join(dir, "status.sock")}
		s.waitWorkers()

		cont := startContinuous(t, cfg.webAddr(), 20*time.Millisecond, 20*time.Second)
		time.Sleep(500 * time.Millisecond)
		term := time.Now()
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		time.Sleep(500 * time.Millisecond)
		cont.stop()
		select {
		case <-done:
		case <-time.After(b.exitLimit() + 2*time.Second):
			t.Fatalf("hapsuper still runs %s after SIGTERM with its stderr not read", time.Since(term))
		}
		code := harness.ExitCode(cmd.ProcessState)
		took := time.Since(term)
		t.Logf("exit %d %s after SIGTERM with stderr stalled; %s", code, took, cont.rec.summary())
		if code != 0 {
			t.Errorf("exit code %d, want 0", code)
		}
		if took > b.deadline() {
			t.Errorf("exit %s after SIGTERM, past the deadline %s: the drain did not end by itself", took, b.deadline())
		}
		checkNoFailures(t, cont.rec)
		checkNoHAProxyLeft(t, dir)
	})
}
