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
// it (reaped), and its output arrives on out once the pipe closes.
type reloadCheck struct {
	pid     int
	origin  string // the signal that asked for the reload
	started time.Time
	out     chan []byte // buffered: the reading goroutine never blocks
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

// maxCheckOutput bounds what is kept of a check's output: HAProxy prints
// a few lines per error.
const maxCheckOutput = 64 << 10

// startReloadCheck starts `<argv[0]> -c <argv[1:]...>` in its own process
// group, with stdout and stderr on one pipe that a goroutine reads until it
// closes (the process and anything it started are gone: the timeout kills
// the group).
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
	c := &reloadCheck{pid: p.Pid, origin: origin, started: now, out: make(chan []byte, 1),
		killGroup: func() error { return killGroup(pgid) }}
	p.Release() // the reaper waits with wait4(-1)
	go func() {
		defer r.Close()
		b, _ := io.ReadAll(io.LimitReader(r, maxCheckOutput))
		_, _ = io.Copy(io.Discard, r) // until every holder of the pipe is gone
		c.out <- b
	}()
	return c, nil
}

// done reports whether the check is over: exited and its output read.
func (c *reloadCheck) done() bool { return c.exited && c.outDone }

// kill ends a check that ran too long, and everything it started.
func (c *reloadCheck) kill() error {
	c.killed = true
	return c.killGroup()
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
