package integration

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// logLine is one line hapsuper wrote on stderr. JSON lines carry msg, level
// and fields; anything else (HAProxy's own alerts) is kept as raw text.
type logLine struct {
	at     time.Time // the "time" field, or when the test read the line
	msg    string
	level  string
	fields map[string]any
	raw    string
}

// str returns a field as text.
func (l logLine) str(key string) string {
	if v, ok := l.fields[key]; ok {
		return fmt.Sprint(v)
	}
	return ""
}

// num returns a numeric field, and whether it was one.
func (l logLine) num(key string) (float64, bool) {
	v, ok := l.fields[key].(float64)
	return v, ok
}

// supervisor is one hapsuper process of a test, with its own directory
// holding the sockets, the override file and the HAProxy config.
type supervisor struct {
	t        *testing.T
	dir      string
	master   string // --master-socket
	status   string // --status-socket
	cmd      *exec.Cmd
	pid      int
	started  time.Time
	exitedCh chan struct{}
	logsDone chan struct{} // closed when stderr reached EOF

	mu       sync.Mutex
	lines    []logLine
	changed  chan struct{} // closed and replaced on every new line
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
		changed:  make(chan struct{}),
		exitedCh: make(chan struct{}),
		logsDone: make(chan struct{}),
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
	go s.readLogs(pr)
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

func (s *supervisor) readLogs(r *os.File) {
	defer close(s.logsDone)
	defer r.Close()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		l := logLine{at: time.Now(), raw: sc.Text()}
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil {
			l.fields = m
			l.msg, l.level = l.str("msg"), l.str("level")
			if ts, err := time.Parse(time.RFC3339Nano, l.str("time")); err == nil {
				l.at = ts
			}
		}
		s.mu.Lock()
		s.lines = append(s.lines, l)
		close(s.changed)
		s.changed = make(chan struct{})
		s.mu.Unlock()
	}
}

// logs returns every line so far.
func (s *supervisor) logs() []logLine {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]logLine(nil), s.lines...)
}

// findLog returns the first line with msg.
func (s *supervisor) findLog(msg string) (logLine, bool) {
	for _, l := range s.logs() {
		if l.msg == msg {
			return l, true
		}
	}
	return logLine{}, false
}

// countLog counts the lines with msg.
func (s *supervisor) countLog(msg string) int {
	n := 0
	for _, l := range s.logs() {
		if l.msg == msg {
			n++
		}
	}
	return n
}

// waitLog waits, at most timeout, for the first line with msg; the test
// fails when it does not come.
func (s *supervisor) waitLog(msg string, timeout time.Duration) logLine {
	s.t.Helper()
	l, ok := s.awaitLog(msg, timeout)
	if !ok {
		s.t.Fatalf("hapsuper did not log %q within %s", msg, timeout)
	}
	return l
}

// awaitLog is waitLog that reports instead of failing.
func (s *supervisor) awaitLog(msg string, timeout time.Duration) (logLine, bool) {
	deadline := time.After(timeout)
	for {
		s.mu.Lock()
		ch := s.changed
		s.mu.Unlock()
		if l, ok := s.findLog(msg); ok {
			return l, true
		}
		select {
		case <-ch:
		case <-deadline:
			return logLine{}, false
		}
	}
}

// awaitRaw waits, at most timeout, for the first line that starts with
// prefix, JSON or not (the Go runtime's own traces are plain text).
func (s *supervisor) awaitRaw(prefix string, timeout time.Duration) (logLine, bool) {
	deadline := time.After(timeout)
	for {
		s.mu.Lock()
		ch := s.changed
		s.mu.Unlock()
		for _, l := range s.logs() {
			if strings.HasPrefix(l.raw, prefix) {
				return l, true
			}
		}
		select {
		case <-ch:
		case <-deadline:
			return logLine{}, false
		}
	}
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
	select {
	case <-s.logsDone:
	case <-time.After(time.Second):
	}
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

// stderr returns everything hapsuper (and HAProxy) wrote.
func (s *supervisor) stderr() string {
	var b strings.Builder
	for _, l := range s.logs() {
		b.WriteString(l.raw + "\n")
	}
	return b.String()
}

// dumpLogs puts hapsuper's output into the test log (last 200 lines).
func (s *supervisor) dumpLogs() {
	ls := s.logs()
	if len(ls) > 200 {
		ls = ls[len(ls)-200:]
	}
	s.t.Logf("hapsuper output (%d lines shown):", len(ls))
	for _, l := range ls {
		s.t.Log("  " + l.raw)
	}
}
