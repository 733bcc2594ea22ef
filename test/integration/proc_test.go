package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hapsuper/hapsuper/test/harness"
)

// supervisor is one hapsuper process of a test, with its own directory
// holding the sockets, the override file and the HAProxy config.
type supervisor struct {
	t                *testing.T
	dir              string
	master           string // --master-socket
	status           string // --status-socket
	started          time.Time
	*harness.Process // hapsuper; its Log holds hapsuper's and HAProxy's output
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

// startSupervisor runs hapsuper over HAProxy h with cfg (argv: haproxy -f cfg)
// and stops it, and whatever it left, when the test ends.
func startSupervisor(t *testing.T, h haproxyVersion, dir, cfg string, flags ...string) *supervisor {
	t.Helper()
	return startCommand(t, dir, procOptions{}, supervisorArgs(dir, flags, h.command(t, dir), "-f", cfg))
}

// serve writes cfg into a new test directory, runs hapsuper over HAProxy h
// with it and flags, and waits until cfg's web frontend accepts connections.
func serve(t *testing.T, h haproxyVersion, cfg haproxyConfig, flags ...string) *supervisor {
	t.Helper()
	dir := t.TempDir()
	s := startSupervisor(t, h, dir, cfg.write(t, dir), flags...)
	s.waitReady(cfg.webAddr())
	return s
}

// startWrapped runs hapsuper as o says with fast flags, in a new test
// directory, over a script as "haproxy" that runs the shell text pre (as a
// slow start or a large configuration would) and then execs HAProxy h with
// cfg (same pid: the master; hapsuper's -vv probe runs pre as well).
func startWrapped(t *testing.T, h haproxyVersion, cfg haproxyConfig, pre string, o procOptions) *supervisor {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "haproxy-wrapper.sh")
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+pre+"\nexec "+h.command(t, dir)+` "$@"`+"\n"), 0o755); err != nil {
		t.Fatalf("write the HAProxy wrapper: %v", err)
	}
	return startCommand(t, dir, o, supervisorArgs(dir, fast.flags(), path, "-f", cfg.write(t, dir)))
}

// procOptions say how startCommand runs hapsuper.
type procOptions struct {
	prefix []string             // a wrapper such as unshare, or nothing
	env    []string             // added to the test's environment
	attr   *syscall.SysProcAttr // namespaces to start it in, or nil
}

// startCommand runs hapsuper with args as o says, and stops it, and
// whatever it left, when the test ends.
func startCommand(t *testing.T, dir string, o procOptions, args []string) *supervisor {
	t.Helper()
	bin := hapsuperBin(t)
	s := &supervisor{
		t: t, dir: dir,
		master: filepath.Join(dir, "master.sock"),
		status: filepath.Join(dir, "status.sock"),
	}
	argv := append(append(append([]string{}, o.prefix...), bin), args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	if len(o.env) > 0 {
		cmd.Env = append(os.Environ(), o.env...)
	}
	cmd.SysProcAttr = o.attr
	t.Logf("start: %s", strings.Join(argv, " "))
	s.started = time.Now()
	var err error
	if s.Process, err = harness.Start(cmd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !s.Kill() {
			t.Errorf("hapsuper (pid %d) not reaped 5s after SIGKILL", s.Pid())
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
	if err := s.Signal(sig); err != nil {
		s.t.Fatalf("hapsuper: %v", err)
	}
	return at
}

// waitExit waits, at most timeout, for hapsuper to exit and returns its
// code (128+signal when a signal killed it) and when it exited.
func (s *supervisor) waitExit(timeout time.Duration) (int, time.Time) {
	s.t.Helper()
	select {
	case <-s.Done():
	case <-time.After(timeout):
		s.t.Fatalf("hapsuper still running %s later", timeout)
	}
	// Let the reader take the last lines; HAProxy processes that outlive
	// hapsuper would hold the pipe open, hence the bound.
	s.WaitRead(time.Second)
	return s.Exit()
}

// warnings returns the config warnings hapsuper logged that mention sub.
func (s *supervisor) warnings(sub string) []string {
	var ws []string
	for _, l := range s.All("config warning") {
		if w := l.Str("warning"); strings.Contains(w, sub) {
			ws = append(ws, w)
		}
	}
	return ws
}

// stopClean sends SIGTERM and asserts that hapsuper exits 0 within 10 s and
// leaves no HAProxy process.
func (s *supervisor) stopClean() {
	s.t.Helper()
	term := s.signal(syscall.SIGTERM)
	code, exitAt := s.waitExit(10 * time.Second)
	s.t.Logf("exit %d %s after SIGTERM", code, exitAt.Sub(term))
	s.checkClean(code)
}

// checkClean asserts that hapsuper exited 0 and left no HAProxy process.
func (s *supervisor) checkClean(code int) {
	s.t.Helper()
	if code != 0 {
		s.t.Errorf("exit code %d, want 0", code)
	}
	checkNoHAProxyLeft(s.t, s.dir)
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
