package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/hapsuper/hapsuper/conf"
	"github.com/hapsuper/hapsuper/drain"
	"github.com/hapsuper/hapsuper/status"
)

// fetchTimeout bounds one status request: several times the server's hold
// on a silent connection (status.requestTimeout), so that a client behind a
// flood of silent ones is still answered.
const fetchTimeout = 5 * time.Second

// statusFlags are the status command's settings.
type statusFlags struct {
	socket   string
	json     bool
	watch    bool
	interval time.Duration
}

// newStatusFlags binds the status command's flags to f; its help and
// parsing both come from here.
func newStatusFlags(f *statusFlags) *flag.FlagSet {
	fs := flag.NewFlagSet("hapsuper status", flag.ContinueOnError)
	def := envOr(conf.StatusSocketEnv, conf.DefaultStatusSocket)
	fs.StringVar(&f.socket, "status-socket", def, "status socket of the running hapsuper (its --status-socket)")
	fs.StringVar(&f.socket, "socket", def, "the same as --status-socket")
	fs.BoolVar(&f.json, "json", false, "print JSON (one document per refresh with --watch)")
	fs.BoolVar(&f.watch, "watch", false, "refresh until the supervisor exits, then show how it ended; wait up to 10s for it to start")
	fs.DurationVar(&f.interval, "interval", 500*time.Millisecond, "refresh interval of --watch (at least 50ms)")
	return fs
}

// describeStatusFlags is the status command's flags as its help shows them.
func describeStatusFlags() []conf.Flag {
	return conf.Describe(newStatusFlags(&statusFlags{}), func(name string) string {
		if name == "socket" || name == "status-socket" {
			return conf.StatusSocketEnv
		}
		return ""
	})
}

// statusCommand prints the supervisor's state once, or until it exits with --watch.
func statusCommand(args []string, stdout, stderr io.Writer) int {
	var f statusFlags
	fs := newStatusFlags(&f)
	if code, done := parseCommandFlags("status", fs, args, stdout, stderr); done {
		return code
	}
	if fs.NArg() > 0 {
		return usageFailed(stderr, "status", fmt.Errorf("status: unexpected argument %q", fs.Arg(0)))
	}
	if f.interval < 50*time.Millisecond {
		fmt.Fprintln(stderr, "hapsuper status: --interval must be at least 50ms")
		return 2
	}
	show := func(s status.Snapshot) error {
		if f.json {
			return json.NewEncoder(stdout).Encode(s)
		}
		if f.watch && isTerminal(stdout) {
			fmt.Fprint(stdout, "\x1b[H\x1b[2J") // clear the screen between refreshes
		}
		return status.Render(stdout, s, time.Now())
	}
	if !f.watch {
		s, err := status.Fetch(f.socket, fetchTimeout)
		if err != nil {
			fmt.Fprintf(stderr, "hapsuper status: %v\n", err)
			return 1
		}
		return boolCode(show(s) != nil)
	}
	endTo := stdout // after the last frame; JSON output stays documents only
	if f.json {
		endTo = stderr
	}
	return watchStatus(f.socket, f.interval, watchWait, show, endTo, stderr)
}

// watchWait is how long status --watch waits for the socket to appear (a
// hapsuper that is starting, a pod that is being created), as kubectl -w
// waits for its object.
const watchWait = 10 * time.Second

// watchStatus shows a snapshot every interval until the supervisor exits,
// then a last line to endTo that says how it ended; the user may interrupt
// it. It waits up to wait for a socket that is not there yet or refuses.
func watchStatus(socket string, interval, wait time.Duration, show func(status.Snapshot) error, endTo, stderr io.Writer) int {
	intr := make(chan os.Signal, 1)
	signal.Notify(intr, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(intr)
	type result struct {
		last status.Snapshot
		err  error
	}
	done := make(chan result, 1)
	go func() {
		last, err := watchOnce(socket, interval, wait, show, stderr)
		done <- result{last, err}
	}()
	var r result
	select {
	case <-intr:
		return 0
	case r = <-done:
	}
	switch {
	case r.err == nil:
		fmt.Fprintln(endTo, endLine(r.last))
		return 0
	case errors.Is(r.err, status.ErrGone):
		fmt.Fprintf(stderr, "hapsuper status: %v (last phase seen: %s)\n", r.err, r.last.Phase)
		return 1
	default:
		fmt.Fprintf(stderr, "hapsuper status: %v\n", r.err)
		return 1
	}
}

// watchOnce runs status.Watch, retrying the connection every 200ms for up
// to wait while the socket is missing or refuses.
func watchOnce(socket string, interval, wait time.Duration, show func(status.Snapshot) error, stderr io.Writer) (status.Snapshot, error) {
	give := time.Now().Add(wait)
	said := false
	for {
		shown := false
		last, err := status.Watch(socket, interval, fetchTimeout, func(s status.Snapshot) error {
			shown = true
			return show(s)
		})
		notYet := errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ECONNREFUSED)
		if shown || !notYet || time.Now().After(give) {
			return last, err
		}
		if !said {
			fmt.Fprintf(stderr, "hapsuper status: waiting up to %s for %s\n", wait, socket)
			said = true
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// endLine says how the supervisor ended, from its final snapshot.
func endLine(s status.Snapshot) string {
	d := s.Drain
	switch {
	case d.Reason != drain.ReasonNone:
		line := fmt.Sprintf("hapsuper exited: drain ended %s", d.Reason)
		if !d.SoftStop.IsZero() && !d.StopRequested.IsZero() {
			line += fmt.Sprintf(" after %s", d.SoftStop.Sub(d.StopRequested).Round(time.Millisecond))
		}
		if d.Detail != "" {
			line += ": " + d.Detail
		}
		return line
	case !d.StopRequested.IsZero():
		return "hapsuper exited: HAProxy exited during the drain, before it ended"
	default:
		return "hapsuper exited: HAProxy exited without a drain"
	}
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func boolCode(failed bool) int {
	if failed {
		return 1
	}
	return 0
}
