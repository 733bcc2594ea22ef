// Command hapsuper is the PID 1 of an HAProxy container: it runs HAProxy in
// master-worker mode and drains it when the pod is told to stop.
//
//	hapsuper [flags] [-- haproxy-binary [haproxy args...]]
//	hapsuper status [--socket PATH] [--json] [--watch]
//	hapsuper version
//	hapsuper demo [flags]     (HAProxy on an embedded example config)
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
	"runtime/debug"

	"github.com/lmittmann/tint"

	"github.com/hapsuper/hapsuper/conf"
	"github.com/hapsuper/hapsuper/supervisor"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = ""

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	cmd := ""
	if len(args) > 0 {
		cmd = args[0]
	}
	switch cmd {
	case "version":
		fmt.Fprintln(stdout, "hapsuper", versionString())
		return 0
	case "status":
		return statusCommand(args[1:], stdout, stderr)
	case "demo":
		return demoCommand(args[1:], stdout, stderr)
	case "run":
		args = args[1:]
	}
	return runCommand(args, stderr)
}

func runCommand(args []string, stderr io.Writer) int {
	s, err := conf.Parse(args, os.Getenv)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "hapsuper: %v\n", err)
		return supervisor.ExitConfig
	}
	log := newLogger(stderr, s.LogFormat, s.LogLevel)
	log.Info("hapsuper starting", "version", versionString(), "settings", s)
	code, err := supervisor.New(s, log).Run(context.Background())
	if err != nil {
		log.Error("hapsuper failed", "err", err, "code", code)
	}
	return code
}

func newLogger(w io.Writer, format string, level slog.Level) *slog.Logger {
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level}))
	}
	return slog.New(tint.NewHandler(w, &tint.Options{Level: level, NoColor: !isTerminal(w), TimeFormat: "15:04:05.000"}))
}

func versionString() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "dev"
}
