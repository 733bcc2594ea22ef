// Command hapsuper is the PID 1 of an HAProxy container: it runs HAProxy in
// master-worker mode and drains it when the pod is told to stop.
// `hapsuper help` lists its commands (help.go), each with its flags.
//
// main stays thin: it picks the command, runs it and maps its error to an
// exit code.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/lmittmann/tint"

	"github.com/hapsuper/hapsuper/conf"
	"github.com/hapsuper/hapsuper/supervisor"
	"github.com/hapsuper/hapsuper/supervisor/earlysignal"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = ""

func main() {
	if shim, ok := shimCommand(os.Args[0]); ok { // installed as gopherd or s6-svc (gopherd.go, s6svc.go)
		earlysignal.Release()
		os.Exit(shim(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run picks the command named by the first argument; without one (no
// arguments, or a flag first) it is run, with the overview as its help.
// Signals have been caught since the process started (earlysignal): the
// commands that supervise nothing give them back their default action.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 1 && (args[0] == "--version" || args[0] == "-version") {
		earlysignal.Release()
		return versionCommand(nil, stdout, stderr)
	}
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		return runCommand("", args, stdout, stderr)
	}
	c, ok := lookupCommand(args[0])
	if !ok {
		earlysignal.Release()
		return unknownCommand(args[0], stderr)
	}
	if c.name != "run" && c.name != "demo" && c.name != "sidecar" {
		earlysignal.Release()
	}
	return c.run(args[1:], stdout, stderr)
}

// runCommand parses the run flags and supervises HAProxy. name is the
// command as the user gave it: "run", "demo", or "" for the default.
func runCommand(name string, args []string, stdout, stderr io.Writer) int {
	s, code, done := parseRun(name, args, stdout, stderr)
	if done {
		return code
	}
	return supervise(s, stderr)
}

// parseRun parses the run flags of the command name: on -h or --help it
// prints the command's help (the overview for the default command), on an
// error the error; done says the command must return code.
func parseRun(name string, args []string, stdout, stderr io.Writer) (s conf.Settings, code int, done bool) {
	s, err := conf.Parse(args, os.LookupEnv)
	var usage *conf.UsageError
	switch {
	case err == nil:
		return s, 0, false
	case errors.Is(err, flag.ErrHelp) && name == "":
		writeOverview(stdout)
		return s, 0, true
	case errors.Is(err, flag.ErrHelp):
		c, _ := lookupCommand(name)
		writeHelp(stdout, c)
		return s, 0, true
	case errors.As(err, &usage):
		if name == "" {
			name = "run"
		}
		return s, usageFailed(stderr, name, err), true
	}
	fmt.Fprintf(stderr, "hapsuper: %v\n", err)
	return s, supervisor.ExitConfig, true
}

// supervise runs HAProxy under the supervisor until it exits. Its log goes
// through a logSink, and SIGPIPE is caught: a log reader that stalls or
// goes away must neither block the drain nor end PID 1 (a write to a
// closed stderr then fails with EPIPE, which the sink ignores).
func supervise(s conf.Settings, stderr io.Writer) int {
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	sink := newLogSink(stderr)
	defer sink.Close()
	log := newLogger(sink, s.LogFormat, s.LogLevel)
	logStart(log, s)
	for _, w := range conf.UnknownEnv(os.Environ()) {
		log.Warn("unknown variable", "warning", w)
	}
	code, err := supervisor.New(s, log, openRouting).WithSignals(earlysignal.Caught()).
		WithLogOutput(sink, s.LogFormat == "json").Run(context.Background())
	if err != nil {
		log.Error("hapsuper failed", "err", err, "code", code)
	}
	return code
}

func newLogger(w io.Writer, format string, level slog.Level) *slog.Logger {
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level}))
	}
	term := w
	if s, ok := w.(*logSink); ok {
		term = s.w
	}
	return slog.New(tint.NewHandler(w, &tint.Options{Level: level, NoColor: !isTerminal(term), TimeFormat: "15:04:05.000"}))
}

func versionString() string {
	if version != "" {
		return version
	}
	return moduleVersion(debug.ReadBuildInfo())
}

// moduleVersion is the module version go install recorded, or "dev" for a
// build from a checkout (go build, go run), which Go records as "(devel)".
func moduleVersion(bi *debug.BuildInfo, ok bool) string {
	if ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}

// buildDetails is what `hapsuper version` adds to the version: the commit
// the binary was built from (with "+dirty" for local changes), its time,
// the Go release and the platform, from the build information Go embeds
// (-buildvcs; absent with -trimpath builds outside a checkout).
func buildDetails() string {
	parts := []string{runtime.Version(), runtime.GOOS + "/" + runtime.GOARCH}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return strings.Join(parts, ", ")
	}
	var rev, at, dirty string
	for _, kv := range bi.Settings {
		switch kv.Key {
		case "vcs.revision":
			rev = kv.Value
		case "vcs.time":
			at = kv.Value
		case "vcs.modified":
			if kv.Value == "true" {
				dirty = "+dirty"
			}
		}
	}
	if rev != "" {
		parts = append([]string{"commit " + rev[:min(len(rev), 12)] + dirty + " " + at}, parts...)
	}
	return strings.Join(parts, ", ")
}

// logStart logs the start: at INFO the version and what decides a drain's
// length, on one line a person can read; at DEBUG every setting.
func logStart(log *slog.Logger, s conf.Settings) {
	log.Info("hapsuper starting", "version", versionString(),
		"grace-period", s.GracePeriod.String(), "max-wait", s.MaxWait.String(), "quiet-period", s.QuietPeriod.String(),
		"routing", s.Routing, "haproxy", strings.Join(s.HAProxy, " "))
	log.Debug("settings", "settings", s)
}
