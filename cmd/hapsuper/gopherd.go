package main

import (
	"errors"
	"fmt"
	"io"
	"net"

	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/hapsuper/hapsuper/conf"
	"github.com/hapsuper/hapsuper/drain"
	"github.com/hapsuper/hapsuper/status"
)

// The gopherd command: hapsuper installed as `gopherd` in HAProxy
// Technologies' controller images (docs/haproxytech.md). Their controllers
// reload HAProxy over the master socket and, when it is not usable, run
// `gopherd signal haproxy SIGUSR2` (kubernetes-ingress) or `gopherd haproxy
// restart` (HAProxy Unified Gateway). Both become a checked reload of the
// running hapsuper: SIGUSR2 to the process serving the status socket (found
// by the socket's peer credentials), then its status read until that reload
// ends. Exit 0 when a new worker serves, 1 when it was refused or failed.

// gopherdName is the program name that selects the gopherd command.
const gopherdName = "gopherd"

// gopherdForms are the command lines the gopherd command answers.
var gopherdForms = [][]string{
	{"signal", "haproxy", "SIGUSR2"},
	{"haproxy", "restart"},
}

// gopherdReloadTimeout bounds the wait for the reload's outcome: the
// supervisor's haproxy -c (bounded by its own timeout) and the new worker.
const gopherdReloadTimeout = 60 * time.Second

// gopherdPoll is how often the status is read while the reload runs.
const gopherdPoll = 100 * time.Millisecond

// isGopherd reports whether the program was started under gopherd's name.
func isGopherd(argv0 string) bool { return filepath.Base(argv0) == gopherdName }

func gopherdCommand(args []string, stdout, stderr io.Writer) int {
	if !gopherdForm(args) {
		var forms []string
		for _, f := range gopherdForms {
			forms = append(forms, "`gopherd "+strings.Join(f, " ")+"`")
		}
		fmt.Fprintf(stderr, "gopherd: %q is not supported: this is hapsuper installed as gopherd, which answers only %s (a checked reload of HAProxy); run hapsuper for everything else\n",
			strings.Join(args, " "), strings.Join(forms, " and "))
		return 2
	}
	socket := envOr(conf.StatusSocketEnv, conf.DefaultStatusSocket)
	w, err := gopherdReload(socket, gopherdReloadTimeout, time.Now)
	if err != nil {
		fmt.Fprintf(stderr, "gopherd: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "gopherd: haproxy reloaded by hapsuper: worker %d serves\n", w)
	return 0
}

func gopherdForm(args []string) bool {
	for _, f := range gopherdForms {
		if len(args) == len(f) && strings.EqualFold(strings.Join(args, " "), strings.Join(f, " ")) {
			return true
		}
	}
	return false
}

// gopherdReload asks the hapsuper serving socket for a checked reload and
// waits, up to timeout, until it ends; it returns the new worker's pid.
func gopherdReload(socket string, timeout time.Duration, now func() time.Time) (int, error) {
	before, err := status.Fetch(socket, fetchTimeout)
	if err != nil {
		return 0, err
	}
	if stopping(before.Phase) {
		return 0, fmt.Errorf("hapsuper is stopping HAProxy (phase %s): no reload is sent now", before.Phase)
	}
	pid, err := socketPeer(socket)
	if err != nil {
		return 0, err
	}
	if err := syscall.Kill(pid, syscall.SIGUSR2); err != nil {
		return 0, fmt.Errorf("ask hapsuper (pid %d) for a reload: %w (run the controller as hapsuper's user)", pid, err)
	}
	ended := func(r status.Reloads) int { return r.OK + r.Refused + r.Failed }
	start := now()
	for now().Sub(start) < timeout {
		time.Sleep(gopherdPoll)
		s, err := status.Fetch(socket, fetchTimeout)
		if err != nil {
			return 0, fmt.Errorf("follow the reload: %w", err)
		}
		last := s.Reloads.Last
		if last != nil && last.Origin == "SIGUSR2" && ended(s.Reloads) > ended(before.Reloads) {
			switch last.Result {
			case status.ReloadOK:
				return last.Worker, nil
			case status.ReloadRefused, status.ReloadFailed:
				return 0, fmt.Errorf("reload %s: %s; HAProxy keeps serving the previous configuration", last.Result, last.Detail)
			}
		}
		if stopping(s.Phase) {
			return 0, fmt.Errorf("hapsuper began stopping HAProxy (phase %s) before the reload ended", s.Phase)
		}
	}
	return 0, fmt.Errorf("the reload did not end within %v: see hapsuper's log", timeout)
}

func stopping(p drain.Phase) bool { return p == drain.Stopping || p == drain.Exited }

// socketPeer returns the pid of the process that serves the unix socket at
// path (SO_PEERCRED): the running hapsuper.
func socketPeer(path string) (int, error) {
	c, err := net.DialTimeout("unix", path, fetchTimeout)
	if err != nil {
		return 0, fmt.Errorf("connect to status socket %s: %w", path, err)
	}
	defer c.Close()
	raw, err := c.(*net.UnixConn).SyscallConn()
	if err != nil {
		return 0, fmt.Errorf("read the peer of %s: %w", path, err)
	}
	var cred *syscall.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil {
		return 0, fmt.Errorf("read the peer of %s: %w", path, err)
	}
	if credErr != nil {
		return 0, fmt.Errorf("read the peer of %s: %w", path, credErr)
	}
	// Ask for the status too, so that the server sees a whole request.
	c.SetDeadline(time.Now().Add(fetchTimeout))
	if _, err := io.WriteString(c, "status\n"); err == nil {
		io.Copy(io.Discard, io.LimitReader(c, 1<<20))
	}
	if cred.Pid <= 0 {
		return 0, errors.New("read the peer of " + path + ": no pid")
	}
	return int(cred.Pid), nil
}
