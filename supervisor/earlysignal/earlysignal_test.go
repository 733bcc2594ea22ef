package earlysignal

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// TestCaught_FromInit: a signal sent before anyone asked for it is in the
// channel; without init's handler SIGTERM would end the test process.
func TestCaught_FromInit(t *testing.T) {
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatalf("send SIGTERM to the test process: %v", err)
	}
	select {
	case sig := <-Caught():
		if sig != syscall.SIGTERM {
			t.Errorf("caught %v, want SIGTERM", sig)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("SIGTERM not caught within 5 s")
	}
}

// releaseChild is set in the child process of TestRelease_RaisesCaughtAgain.
const releaseChild = "HAPSUPER_EARLYSIGNAL_RELEASE_CHILD"

// TestRelease_RaisesCaughtAgain: a signal caught before Release acts as if
// it had never been caught once Release returns: the child, which caught a
// SIGTERM and released, dies of it.
func TestRelease_RaisesCaughtAgain(t *testing.T) {
	if os.Getenv(releaseChild) != "" {
		_ = syscall.Kill(syscall.Getpid(), syscall.SIGTERM)
		for len(Caught()) == 0 { // bounded by the parent's timeout
			time.Sleep(time.Millisecond)
		}
		Release()
		time.Sleep(5 * time.Second) // the raised SIGTERM ends the process first
		os.Exit(0)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestRelease_RaisesCaughtAgain$")
	cmd.Env = append(os.Environ(), releaseChild+"=1")
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatalf("start the child: %v", err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatalf("child exited with %v, want killed by SIGTERM", err)
		}
		ws := ee.Sys().(syscall.WaitStatus)
		if !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
			t.Errorf("child ended with %v, want killed by SIGTERM", ws)
		}
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatal("child still running after 20 s")
	}
}
