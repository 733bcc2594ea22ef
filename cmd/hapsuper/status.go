package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/hapsuper/hapsuper/conf"
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
	fs.StringVar(&f.socket, "socket", envOr(conf.StatusSocketEnv, conf.DefaultStatusSocket), "status socket of the running hapsuper (its --status-socket)")
	fs.BoolVar(&f.json, "json", false, "print JSON (one document per refresh with --watch)")
	fs.BoolVar(&f.watch, "watch", false, "refresh until the supervisor exits")
	fs.DurationVar(&f.interval, "interval", 500*time.Millisecond, "refresh interval of --watch (at least 50ms)")
	return fs
}

// describeStatusFlags is the status command's flags as its help shows them.
func describeStatusFlags() []conf.Flag {
	return conf.Describe(newStatusFlags(&statusFlags{}), func(name string) string {
		if name == "socket" {
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
	s, err := status.Fetch(f.socket, fetchTimeout)
	if err != nil {
		fmt.Fprintf(stderr, "hapsuper status: %v\n", err)
		return 1
	}
	if err := show(s); err != nil || !f.watch {
		return boolCode(err != nil)
	}
	return watchStatus(f.socket, f.interval, show, stderr)
}

// watchStatus refreshes until the supervisor's socket goes away (its normal
// end) or the user interrupts.
func watchStatus(socket string, interval time.Duration, show func(status.Snapshot) error, stderr io.Writer) int {
	intr := make(chan os.Signal, 1)
	signal.Notify(intr, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(intr)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-intr:
			return 0
		case <-tick.C:
		}
		s, err := status.Fetch(socket, fetchTimeout)
		if err != nil {
			fmt.Fprintf(stderr, "hapsuper status: %v\n", status.ErrGone)
			return 0
		}
		if err := show(s); err != nil {
			return 1
		}
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
