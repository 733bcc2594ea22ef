package supervisor

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"syscall"
	"time"
)

// reloadCheck is one `haproxy -c` on the command line a reload would load
// (the user's files and the override file), run before hapsuper sends
// SIGUSR2: HAProxy's own systemd unit checks the same way before a reload,
// and since 3.1 a reload whose configuration file cannot be opened makes
// the master exit. The check is a child of hapsuper, so the reaper collects
// it (reaped), and its output arrives on out once the pipe closes, or at
// most checkOutputGrace after the check exited or was killed: a process
// the configuration starts (a lua-load's os.execute("sleep 25 &"), in
// its own session or not) may hold the pipe for as long as it lives, and
// the check is judged by its exit, not by them.
type reloadCheck struct {
	pid     int
	origin  string // the signal that asked for the reload
	started time.Time
	out     chan []byte // buffered: the reading goroutine never blocks
	pipe    *os.File    // the read end of the output, nil in tests without one
	// killGroup SIGKILLs the check's process group (tests replace it).
	killGroup func() error

	output  []byte
	outDone bool
	code    int
	exited  bool
	killed  bool // timed out: its process group was killed
}

// reloadCheckTimeout bounds a check; a configuration with thousands of
// certificates can take seconds to parse.
const reloadCheckTimeout = 15 * time.Second

// checkOutputGrace is how long the output is still read once the check
// exited or was killed: what the check wrote is in the pipe by then, and
// HAProxy writes nothing after its exit.
const checkOutputGrace = 300 * time.Millisecond

// maxCheckOutput bounds what is kept of a check's output: HAProxy prints
// a few lines per error.
const maxCheckOutput = 64 << 10

// startReloadCheck starts `<argv[0]> -c <argv[1:]...>` in its own process
// group, with stdout and stderr on one pipe that a goroutine reads until it
// closes (the process and anything it started are gone) or until
// checkOutputGrace after the check's end (stopReading).
func startReloadCheck(argv, env []string, origin string, now time.Time) (*reloadCheck, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("pipe for haproxy -c: %w", err)
	}
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		r.Close()
		w.Close()
		return nil, fmt.Errorf("open %s for haproxy -c: %w", os.DevNull, err)
	}
	args := append([]string{argv[0], "-c"}, argv[1:]...)
	p, err := os.StartProcess(argv[0], args, &os.ProcAttr{
		Env:   env,
		Files: []*os.File{devnull, w, w},
		Sys:   &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL},
	})
	devnull.Close()
	w.Close()
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("start %s -c: %w", argv[0], err)
	}
	pgid := p.Pid
	c := &reloadCheck{pid: p.Pid, origin: origin, started: now, out: make(chan []byte, 1), pipe: r,
		killGroup: func() error { return killGroup(pgid) }}
	p.Release() // the reaper waits with wait4(-1)
	go func() {
		defer r.Close()
		// Until every holder of the pipe is gone or the read deadline:
		// what was read is kept either way.
		b, _ := io.ReadAll(io.LimitReader(r, maxCheckOutput))
		_, _ = io.Copy(io.Discard, r)
		c.out <- b
	}()
	return c, nil
}

// done reports whether the check is over: exited and its output read.
func (c *reloadCheck) done() bool { return c.exited && c.outDone }

// reaped records the check's exit code, as the reaper collected it, and
// bounds the rest of its output.
func (c *reloadCheck) reaped(code int) {
	c.code, c.exited = code, true
	c.stopReading()
}

// kill ends a check that ran too long, and everything it started in its
// process group; its output is read no longer than checkOutputGrace more.
func (c *reloadCheck) kill() error {
	c.killed = true
	c.stopReading()
	return c.killGroup()
}

// stopReading ends the reading of the output checkOutputGrace from now,
// whoever still holds the pipe. It is the only call on the pipe from
// another goroutine than the reader's, which os.File allows.
func (c *reloadCheck) stopReading() {
	if c.pipe != nil {
		_ = c.pipe.SetReadDeadline(time.Now().Add(checkOutputGrace)) // closed already: read to its end
	}
}

// failure says why the check failed, from HAProxy's alert lines; "" when it
// passed.
func (c *reloadCheck) failure() string {
	switch {
	case c.killed:
		return fmt.Sprintf("haproxy -c did not finish within %s", reloadCheckTimeout)
	case c.code == 0:
		return ""
	}
	return fmt.Sprintf("haproxy -c exited %d: %s", c.code, alerts(c.output))
}

// Bounds of what alerts keeps.
const (
	maxAlertLines   = 5
	maxAlertLineLen = 300
)

// alerts returns HAProxy's [ALERT] lines of out without their tag and pid
// (parseHAProxyLine: "[ALERT]    (12) : config : parsing [x.cfg:3] : ..." →
// "config : parsing [x.cfg:3] : ..."), joined with "; ", at most
// maxAlertLines of at most maxAlertLineLen bytes; the last line of out when
// it has none.
func alerts(out []byte) string {
	var keep []string
	var last string
	for line := range strings.SplitSeq(string(bytes.TrimSpace(out)), "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		last = line
		if level, _, msg := parseHAProxyLine([]byte(line)); level == slog.LevelError && len(keep) < maxAlertLines {
			keep = append(keep, truncate(strings.TrimSpace(msg), maxAlertLineLen))
		}
	}
	if len(keep) == 0 {
		if last == "" {
			return "no output"
		}
		return truncate(last, maxAlertLineLen)
	}
	return strings.Join(keep, "; ")
}

// truncate cuts s to n bytes, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// withoutEnv returns env without the variable name.
func withoutEnv(env []string, name string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		if !strings.HasPrefix(kv, name+"=") {
			out = append(out, kv)
		}
	}
	return out
}
