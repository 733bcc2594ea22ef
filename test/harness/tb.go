package harness

import (
	"fmt"
	"io"
	"sync"
)

// TB is what the harness's helpers (k8stest, kube) need of their caller: a
// *testing.T or *testing.B in tests, a Program run in a benchmark command.
// Fatalf and Skipf do not return.
type TB interface {
	Helper()
	Logf(format string, args ...any)
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
	Skipf(format string, args ...any)
	Cleanup(func())
	Failed() bool
}

// Program is a TB for a command that is not a test: Logf writes to its log
// writer when verbose, Errorf records a failure and writes it, Fatalf and
// Skipf end the run, which Run returns as an error, and the Cleanup
// functions run, last first, when Run returns.
type Program struct {
	log     io.Writer
	verbose bool

	mu       sync.Mutex
	failed   bool
	cleanups []func()
}

var _ TB = (*Program)(nil)

// abort is the panic value of Fatalf and Skipf, recovered by Run.
type abort struct{ err error }

// Run calls f with a Program writing to log and returns f's error, or the
// error of the Fatalf or Skipf that ended it, after the cleanups ran.
func Run(log io.Writer, verbose bool, f func(*Program) error) (err error) {
	p := &Program{log: log, verbose: verbose}
	defer func() {
		v := recover()
		p.cleanup()
		if a, ok := v.(abort); ok {
			err = a.err
		} else if v != nil {
			panic(v)
		}
	}()
	return f(p)
}

// Helper does nothing: a program has no call-site reporting.
func (p *Program) Helper() {}

// Logf writes one line to the log writer when the program is verbose.
func (p *Program) Logf(format string, args ...any) {
	if p.verbose {
		fmt.Fprintf(p.log, "  harness: "+format+"\n", args...)
	}
}

// Errorf records a failure and writes it to the log writer.
func (p *Program) Errorf(format string, args ...any) {
	p.mu.Lock()
	p.failed = true
	p.mu.Unlock()
	fmt.Fprintf(p.log, "error: "+format+"\n", args...)
}

// Fatalf ends the run with the error.
func (p *Program) Fatalf(format string, args ...any) {
	p.mu.Lock()
	p.failed = true
	p.mu.Unlock()
	panic(abort{fmt.Errorf(format, args...)})
}

// Skipf ends the run: what it needs is missing.
func (p *Program) Skipf(format string, args ...any) {
	panic(abort{fmt.Errorf("cannot run: "+format, args...)})
}

// Failed reports whether Errorf or Fatalf was called.
func (p *Program) Failed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.failed
}

// Cleanup registers f to run when Run returns.
func (p *Program) Cleanup(f func()) {
	p.mu.Lock()
	p.cleanups = append(p.cleanups, f)
	p.mu.Unlock()
}

// cleanup runs the registered functions, last first.
func (p *Program) cleanup() {
	for {
		p.mu.Lock()
		n := len(p.cleanups)
		if n == 0 {
			p.mu.Unlock()
			return
		}
		f := p.cleanups[n-1]
		p.cleanups = p.cleanups[:n-1]
		p.mu.Unlock()
		f()
	}
}
