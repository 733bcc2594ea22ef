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

	"github.com/hapsuper/hapsuper/status"
)

const (
	defaultStatusSocket = "/var/run/hapsuper/status.sock"
	fetchTimeout        = 2 * time.Second
)

// statusCommand prints the supervisor's state once, or until it exits with --watch.
func statusCommand(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("hapsuper status", flag.ContinueOnError)
	fs.SetOutput(stderr)
	socket := fs.String("socket", envOr("HAPSUPER_STATUS_SOCKET", defaultStatusSocket), "status socket of the running hapsuper (env HAPSUPER_STATUS_SOCKET)")
	asJSON := fs.Bool("json", false, "print JSON (one document per refresh with --watch)")
	watch := fs.Bool("watch", false, "refresh until the supervisor exits")
	interval := fs.Duration("interval", 500*time.Millisecond, "refresh interval of --watch")
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "hapsuper status: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if *interval < 50*time.Millisecond {
		fmt.Fprintln(stderr, "hapsuper status: --interval must be at least 50ms")
		return 2
	}
	show := func(s status.Snapshot) error {
		if *asJSON {
			return json.NewEncoder(stdout).Encode(s)
		}
		if *watch && isTerminal(stdout) {
			fmt.Fprint(stdout, "\x1b[H\x1b[2J") // clear the screen between refreshes
		}
		return status.Render(stdout, s, time.Now())
	}
	s, err := status.Fetch(*socket, fetchTimeout)
	if err != nil {
		fmt.Fprintf(stderr, "hapsuper status: %v\n", err)
		return 1
	}
	if err := show(s); err != nil || !*watch {
		return boolCode(err != nil)
	}
	return watchStatus(*socket, *interval, show, stderr)
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
