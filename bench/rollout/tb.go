package main

import (
	"fmt"
	"os"
	"sync"
	"testing"
)

// benchTB lets the command use the k8stest harness, which reports through a
// testing.TB: Logf prints when verbose, Errorf records a failure, Fatalf and
// Skipf abort the run (a panic that runBench recovers), and Cleanup
// functions run, last first, when the run ends. The embedded interface only
// supplies testing.TB's unexported method: calling a method not defined
// here panics, which is a bug of this file.
type benchTB struct {
	testing.TB
	verbose bool

	mu       sync.Mutex
	failed   bool
	cleanups []func()
}

// abort is the panic value of Fatalf and Skipf.
type abort struct {
	msg     string
	skipped bool
}

var _ testing.TB = (*benchTB)(nil)

func (t *benchTB) Helper()      {}
func (t *benchTB) Name() string { return "bench/rollout" }

func (t *benchTB) Logf(format string, args ...any) {
	if t.verbose {
		fmt.Fprintf(os.Stderr, "  harness: "+format+"\n", args...)
	}
}

func (t *benchTB) Log(args ...any) { t.Logf("%s", fmt.Sprint(args...)) }

func (t *benchTB) Errorf(format string, args ...any) {
	t.mu.Lock()
	t.failed = true
	t.mu.Unlock()
	fmt.Fprintf(os.Stderr, "error: "+format+"\n", args...)
}

func (t *benchTB) Error(args ...any) { t.Errorf("%s", fmt.Sprint(args...)) }

func (t *benchTB) Fatalf(format string, args ...any) {
	t.mu.Lock()
	t.failed = true
	t.mu.Unlock()
	panic(abort{msg: fmt.Sprintf(format, args...)})
}

func (t *benchTB) Fatal(args ...any) { t.Fatalf("%s", fmt.Sprint(args...)) }

func (t *benchTB) Skipf(format string, args ...any) {
	panic(abort{msg: fmt.Sprintf(format, args...), skipped: true})
}

func (t *benchTB) Failed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.failed
}

func (t *benchTB) Cleanup(f func()) {
	t.mu.Lock()
	t.cleanups = append(t.cleanups, f)
	t.mu.Unlock()
}

// cleanup runs the registered functions, last first.
func (t *benchTB) cleanup() {
	for {
		t.mu.Lock()
		n := len(t.cleanups)
		if n == 0 {
			t.mu.Unlock()
			return
		}
		f := t.cleanups[n-1]
		t.cleanups = t.cleanups[:n-1]
		t.mu.Unlock()
		f()
	}
}
