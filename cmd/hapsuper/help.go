package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/hapsuper/hapsuper/conf"
	"github.com/hapsuper/hapsuper/supervisor"
)

// command is one of hapsuper's commands: what runs it and what its help
// says. Its flags come from the same definitions that parse them.
type command struct {
	name    string
	args    string // what follows "hapsuper <name>" in the usage line
	summary string // one line, in the list of commands
	about   string // the paragraph of its help
	flags   func() []conf.Flag
	run     func(args []string, stdout, stderr io.Writer) int
}

// commands lists hapsuper's commands in the order help shows them; run is
// the default.
func commands() []command {
	return []command{
		{
			name:    "run",
			args:    "[flags] [-- haproxy-binary [haproxy args...]]",
			summary: "run HAProxy as PID 1 and drain it on a stop signal (the default command)",
			about: "Runs HAProxy in master-worker mode, reaps every child and routes signals. On a stop\n" +
				"signal it keeps the listeners open until nothing routes new connections to the pod and\n" +
				"the clients are quiet, then soft-stops HAProxy, and hard-stops it at grace − margin.\n" +
				"Without --, it runs " + strings.Join(conf.DefaultHAProxy, " ") + ".\n" +
				"With --companion, the words after -- are the companion's arguments and HAProxy's\n" +
				"command comes from --haproxy-command.\n" +
				"Every flag can also be set by its environment variable; a flag wins over its variable.",
			flags: conf.RunFlags,
			run:   func(args []string, stdout, stderr io.Writer) int { return runCommand("run", args, stdout, stderr) },
		},
		{
			name:    "status",
			args:    "[flags]",
			summary: "show where the running hapsuper and its drain stand",
			about: "Asks the running hapsuper over its status socket and prints the phase, the drain's\n" +
				"times, conditions and reason, and HAProxy's workers. Exits 1 when no hapsuper answers.",
			flags: describeStatusFlags,
			run:   statusCommand,
		},
		{
			name:    "sidecar",
			args:    "[flags]",
			summary: "drain an HAProxy container hapsuper does not run, as a native sidecar its preStop hook asks",
			about:   sidecarAbout,
			flags:   sidecarFlags,
			run:     sidecarCommand,
		},
		{
			name:    "gate",
			args:    "[flags]",
			summary: "ask a hapsuper sidecar's gate (the HAProxy container's preStop hook) and print its answer",
			about:   gateAbout,
			flags:   describeGateFlags,
			run:     gateCommand,
		},
		{
			name:    "demo",
			args:    "[flags] [-- haproxy-binary [haproxy args...]]",
			summary: "run hapsuper on an embedded example: HAProxy on http://127.0.0.1:8080 (or free ports), no cluster needed",
			about:   demoAbout(),
			flags:   conf.RunFlags,
			run:     demoCommand,
		},
		{
			name:    "check",
			args:    "[flags] [--json] [-- haproxy-binary [haproxy args...]]",
			summary: "check, before a rollout, what a drain would observe here: config, grants, routing, kube-proxy",
			about:   checkAbout,
			flags:   checkFlags,
			run:     checkCommand,
		},
		{
			name:    "version",
			summary: "print hapsuper's version",
			about:   "Prints hapsuper's version.",
			flags:   noFlags,
			run:     versionCommand,
		},
		{
			name:    "help",
			args:    "[command]",
			summary: "print the help of a command, or this overview",
			about:   "Prints the help of the command, or without one the overview of every command.",
			flags:   noFlags,
			run:     helpCommand,
		},
	}
}

func noFlags() []conf.Flag { return nil }

func lookupCommand(name string) (command, bool) {
	for _, c := range commands() {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

// usageLine is "hapsuper <name> <args>".
func (c command) usageLine() string {
	return strings.TrimSpace("hapsuper " + c.name + " " + c.args)
}

// writeHelp writes c's help: its usage line, what it does and its flags.
func writeHelp(w io.Writer, c command) {
	fmt.Fprintf(w, "usage: %s\n\n%s\n", c.usageLine(), c.about)
	flags := c.flags()
	if len(flags) == 0 {
		fmt.Fprintln(w, "\nIt takes no flags.")
		return
	}
	fmt.Fprintln(w, "\nflags:")
	writeFlags(w, flags)
}

// usageLines are the usage lines of every command, after that of the
// default command; the README's Usage section shows the same.
func usageLines() []string {
	run, _ := lookupCommand("run")
	lines := []string{"hapsuper " + run.args}
	for _, c := range commands() {
		lines = append(lines, c.usageLine())
	}
	return lines
}

// writeOverview is `hapsuper help`: every command, then the flags of run,
// which `hapsuper [flags]` runs.
func writeOverview(w io.Writer) {
	fmt.Fprintln(w, "hapsuper is the PID 1 of an HAProxy container: it drains HAProxy once routing is\nwithdrawn and clients are quiet.")
	fmt.Fprintln(w, "\nusage:")
	for _, l := range usageLines() {
		fmt.Fprintf(w, "  %s\n", l)
	}
	fmt.Fprintln(w, "\ncommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\n'hapsuper help <command>' or 'hapsuper <command> --help' prints a command's help.")
	fmt.Fprintln(w, "\nflags of run (each also set by its environment variable; a flag wins over its variable):")
	writeFlags(w, conf.RunFlags())
}

// helpCommand prints the help of the command named, or the overview.
func helpCommand(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("hapsuper help", flag.ContinueOnError)
	if code, done := parseCommandFlags("help", fs, args, stdout, stderr); done {
		return code
	}
	switch fs.NArg() {
	case 0:
		writeOverview(stdout)
		return 0
	case 1:
		c, ok := lookupCommand(fs.Arg(0))
		if !ok {
			return unknownCommand(fs.Arg(0), stderr)
		}
		writeHelp(stdout, c)
		return 0
	}
	return usageFailed(stderr, "help", fmt.Errorf("help: unexpected argument %q: give one command", fs.Arg(1)))
}

// versionCommand prints the version.
func versionCommand(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("hapsuper version", flag.ContinueOnError)
	if code, done := parseCommandFlags("version", fs, args, stdout, stderr); done {
		return code
	}
	if fs.NArg() > 0 {
		return usageFailed(stderr, "version", fmt.Errorf("version: unexpected argument %q", fs.Arg(0)))
	}
	fmt.Fprintf(stdout, "hapsuper %s (%s)\n", versionString(), buildDetails())
	return 0
}

// parseCommandFlags parses the flags of the command name. On -h or --help it
// prints the command's help (exit 0); on a command line it cannot read, the
// error and where help is (exit 2). done says the command must return code.
func parseCommandFlags(name string, fs *flag.FlagSet, args []string, stdout, stderr io.Writer) (code int, done bool) {
	err := conf.ParseFlags(fs, args)
	switch {
	case err == nil:
		return 0, false
	case errors.Is(err, flag.ErrHelp):
		c, _ := lookupCommand(name)
		writeHelp(stdout, c)
		return 0, true
	}
	return usageFailed(stderr, name, fmt.Errorf("%s: %w", name, err)), true
}

// usageFailed reports a command line that cannot be read, and where the
// command's help is.
func usageFailed(stderr io.Writer, name string, err error) int {
	fmt.Fprintf(stderr, "hapsuper: %v\nSee 'hapsuper %s --help'.\n", err, name)
	return supervisor.ExitConfig
}

// unknownCommand reports a first argument that is no command: the closest
// command, or HAProxy's command given without the -- before it.
func unknownCommand(name string, stderr io.Writer) int {
	var names []string
	for _, c := range commands() {
		names = append(names, c.name)
	}
	hint := "to run HAProxy with your own command, put it after --: hapsuper [flags] -- haproxy -f <file>"
	if c := conf.Closest(name, names); c != "" {
		hint = "did you mean " + c + "?"
	}
	fmt.Fprintf(stderr, "hapsuper: unknown command %q: %s\nSee 'hapsuper help' for the commands.\n", name, hint)
	return supervisor.ExitConfig
}
