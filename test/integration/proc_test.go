package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hapsuper/hapsuper/test/harness"
)

// supervisor is one hapsuper process of a test, with its own directory
// holding the sockets, the override file and the HAProxy config.
type supervisor struct {
	t           *testing.T
	dir         string
	master      string // --master-socket
	status      string // --status-socket
	cmd         *exec.Cmd
	pid         int
	started     time.Time
	exitedCh    chan struct{}
	harness.Log // hapsuper's and HAProxy's output

	mu       sync.Mutex
	exitCode int
	exitAt   time.Time
}

// supervisorArgs are the flags every test passes: its own paths and JSON
// logs. extra comes before them so that a test may add any flag.
func supervisorArgs(dir string, extra []string, haproxyArgv ...string) []string {
	args := append([]string{}, extra...)
	args = append(args,
		"--master-socket", filepath.Join(dir, "master.sock"),
		"--status-socket", filepath.Join(dir, "status.sock"),
		"--override-file", filepath.Join(dir, "override.cfg"),
		"--log-format", "json",
	)
	return append(append(args, "--"), haproxyArgv...)
}

// fastFlags are the drain timings most tests use.
var fastFlags = []string{"--grace-period", "10s", "--quiet-period", "1s", "--poll-interval", "100ms", "--margin", "2s"}

// startSupervisor runs hapsuper over HAProxy h with cfg (argv: haproxy -f cfg)
// and stops it, and whatever it left, when the test ends.
func startSupervisor(t *testing.T, h haproxyVersion, dir, cfg string, flags ...string) *supervisor {
	t.Helper()
	return startCommand(t, dir, nil, supervisorArgs(dir, flags, h.command(t, dir), "-f", cfg))
}

// startCommand runs prefix + hapsuper + args (prefix is a wrapper such as
// unshare, or nothing).
func startCommand(t *testing.T, dir string, prefix, args []string) *supervisor {
	t.Helper()
	return startCommandWith(t, dir, procOptions{prefix: prefix}, args)
}

// procOptions say how startCommandWith runs hapsuper.
type procOptions struct {
	prefix []string             // a wrapper such as unshare, or nothing
	env    []string             // added to the test's environment
	attr   *syscall.SysProcAttr // namespaces to start it in, or nil
}

// startCommandWith runs hapsuper with args as o says, and stops it, and
// whatever it left, when the test ends.
func startCommandWith(t *testing.T, dir string, o procOptions, args []string) *supervisor {
	t.Helper()
	prefix := o.prefix
	bin := hapsuperBin(t)
	s := &supervisor{
		t: t, dir: dir,
		master:   filepath.Join(dir, "master.sock"),
		status:   filepath.Join(dir, "status.sock"),
		exitedCh: make(chan struct{}),
	}
	argv := append(append(append([]string{}, prefix...), bin), args...)
	s.cmd = exec.Command(argv[0], argv[1:]...)
	if len(o.env) > 0 {
		s.cmd.Env = append(os.Environ(), o.env...)
	}
	s.cmd.SysProcAttr = o.attr
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatalf("pipe for hapsuper's stderr: %v", err)
	}
	// A plain file, not StderrPipe: HAProxy inherits it, and Wait must not
	// wait for HAProxy to close it.
	s.cmd.Stderr, s.cmd.Stdout = pw, pw
	t.Logf("start: %s", strings.Join(argv, " "))
	s.started = time.Now()
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("start hapsuper: %v", err)
	}
	pw.Close()
	s.pid = s.cmd.Process.Pid
	go s.Read(pr)
	go func() {
		_ = s.cmd.Wait()
		s.mu.Lock()
		s.exitCode, s.exitAt = exitCode(s.cmd.ProcessState), time.Now()
		s.mu.Unlock()
		close(s.exitedCh)
	}()
	t.Cleanup(func() {
		select {
		case <-s.exitedCh:
		default:
			_ = s.cmd.Process.Kill()
			<-s.exitedCh
		}
		killLeftovers(t, dir)
		if t.Failed() {
			s.dumpLogs()
		}
	})
	return s
}

// waitLog waits, at most timeout, for the first line with msg; the test
// fails when it does not come.
func (s *supervisor) waitLog(msg string, timeout time.Duration) harness.Entry {
	s.t.Helper()
	l, ok := s.Wait(msg, nil, timeout, nil)
	if !ok {
		s.t.Fatalf("hapsuper did not log %q within %s", msg, timeout)
	}
	return l
}

// waitReady waits for "haproxy ready" and for addr to accept connections.
func (s *supervisor) waitReady(addr string) {
	s.t.Helper()
	s.waitLog("haproxy ready", 15*time.Second)
	waitListening(s.t, addr, 5*time.Second)
}

// signal sends sig to hapsuper and returns when it was sent.
func (s *supervisor) signal(sig syscall.Signal) time.Time {
	s.t.Helper()
	at := time.Now()
	if err := s.cmd.Process.Signal(sig); err != nil {
		s.t.Fatalf("send %v to hapsuper: %v", sig, err)
	}
	return at
}

// waitExit waits, at most timeout, for hapsuper to exit and returns its
// code (128+signal when a signal killed it) and when it exited.
func (s *supervisor) waitExit(timeout time.Duration) (int, time.Time) {
	s.t.Helper()
	select {
	case <-s.exitedCh:
	case <-time.After(timeout):
		s.t.Fatalf("hapsuper still running %s later", timeout)
	}
	// Let the reader take the last lines; HAProxy processes that outlive
	// hapsuper would hold the pipe open, hence the bound.
	s.WaitRead(time.Second)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.exitCode, s.exitAt
}

// exited reports whether hapsuper has exited.
func (s *supervisor) exited() bool {
	select {
	case <-s.exitedCh:
		return true
	default:
		return false
	}
}

// dumpLogs puts hapsuper's output into the test log (last 200 lines).
func (s *supervisor) dumpLogs() {
	ls := s.Lines()
	if len(ls) > 200 {
		ls = ls[len(ls)-200:]
	}
	s.t.Logf("hapsuper output (%d lines shown):", len(ls))
	for _, l := range ls {
		s.t.Log("  " + l.Raw)
	}
}
