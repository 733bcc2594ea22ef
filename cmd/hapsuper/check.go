package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/hapsuper/hapsuper/check"
	"github.com/hapsuper/hapsuper/conf"
)

// checkAbout is check's help paragraph.
const checkAbout = "Checks, before a rollout, what a drain would be able to observe where hapsuper runs: the\n" +
	"HAProxy configuration, the settings, the pod's identity, the grants of the routing mode,\n" +
	"the Services and paths that route to the pod, and every node's kube-proxy healthz. Run it\n" +
	"in the pod (kubectl exec <pod> -- hapsuper check) or with --kubeconfig and the same flags\n" +
	"and environment as run. Each row is OK, WARN or FAIL with the one thing to change.\n" +
	"Exits 0 when every row is OK, 1 with warnings, 3 with failures, 2 for a command line it\n" +
	"cannot read."

// jsonFlag is check's own flag; the others are run's.
var jsonFlag = conf.Flag{Name: "json", Bool: true, Meaning: "print the rows as JSON, for machines", Group: "the report"}

// checkFlags are --json, then run's flags in their groups.
func checkFlags() []conf.Flag {
	return append([]conf.Flag{jsonFlag}, conf.RunFlags()...)
}

// checkCommand runs the preflight with run's flags and environment.
func checkCommand(args []string, stdout, stderr io.Writer) int {
	if i := slices.Index(args, "--"); i >= 0 && slices.Contains(args[i+1:], "--json") {
		return usageFailed(stderr, "check", fmt.Errorf("check: --json after -- would be an argument of HAProxy's command: put it before --, as in hapsuper check --json -- %s", strings.Join(slices.DeleteFunc(slices.Clone(args[i+1:]), func(a string) bool { return a == "--json" }), " ")))
	}
	var asJSON bool
	s, err := conf.ParseWith(args, os.LookupEnv, func(fs *flag.FlagSet) {
		fs.BoolVar(&asJSON, jsonFlag.Name, false, jsonFlag.Meaning)
	})
	var usage *conf.UsageError
	var report check.Report
	switch {
	case errors.Is(err, flag.ErrHelp):
		c, _ := lookupCommand("check")
		writeHelp(stdout, c)
		return 0
	case errors.As(err, &usage):
		return usageFailed(stderr, "check", fmt.Errorf("check: %w", err))
	case err != nil:
		report = check.SettingsFailed(err)
	default:
		report = check.Run(context.Background(), check.NewInput(s, os.Getenv))
	}
	if asJSON {
		err = report.WriteJSON(stdout)
	} else {
		err = report.WriteText(stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "hapsuper: check: write the report: %v\n", err)
		return check.ExitFailures
	}
	return report.ExitCode()
}
