package integration

import (
	"context"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hapsuper/hapsuper/conf"
	"github.com/hapsuper/hapsuper/test/harness"
)

// helpTimeout bounds one run of the binary: help and usage errors return at
// once, so a run that lasts means the command started something.
const helpTimeout = 5 * time.Second

// runBinary runs the built hapsuper with args, in a directory where it can
// find no HAProxy configuration, and returns its output and exit code; a run
// that outlasts helpTimeout fails the test.
func runBinary(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), helpTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, hapsuperBin(t), args...)
	// A run that started HAProxy is stopped at once (SIGINT is the hard stop),
	// so no HAProxy outlives the test; SIGKILL if that fails.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGINT) }
	cmd.WaitDelay = 3 * time.Second
	cmd.Dir = t.TempDir()
	var out, errb limitedBuffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	_ = cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("hapsuper %s still ran after %s (started something?); stdout:\n%s", strings.Join(args, " "), time.Since(start).Round(time.Millisecond), out.String())
	}
	return out.String(), errb.String(), harness.ExitCode(cmd.ProcessState)
}

// TestHelp_EveryCommandPrintsItsFlags: `hapsuper <command> --help`, `-h` and
// `hapsuper help <command>` print the same help on stdout, with every flag
// of the command, and exit 0 without starting anything (demo included). The
// run flags are the definitions' own, so a new flag is expected in help.
func TestHelp_EveryCommandPrintsItsFlags(t *testing.T) {
	var runFlags []string
	for _, f := range conf.RunFlags() {
		runFlags = append(runFlags, f.Name)
	}
	for _, c := range []struct {
		name  string
		flags []string // none: the help says there are none
	}{
		{"", runFlags}, // the overview: hapsuper --help, -h, help
		{"run", runFlags},
		{"demo", runFlags},
		{"status", []string{"socket", "json", "watch", "interval"}},
		{"check", append(slices.Clone(runFlags), "json")},
		{"version", nil},
		{"help", nil},
	} {
		t.Run("cmd="+c.name, func(t *testing.T) {
			forms := [][]string{{c.name, "--help"}, {c.name, "-h"}, {"help", c.name}}
			if c.name == "" {
				forms = [][]string{{"--help"}, {"-h"}, {"help"}}
			}
			var first string
			for i, args := range forms {
				out, errs, code := runBinary(t, args...)
				if code != 0 || errs != "" {
					t.Errorf("hapsuper %s: exit %d, stderr %q; want 0 and nothing", strings.Join(args, " "), code, errs)
				}
				if i == 0 {
					first = out
				} else if out != first {
					t.Errorf("hapsuper %s printed another help than hapsuper %s:\n%s", strings.Join(args, " "), strings.Join(forms[0], " "), out)
				}
			}
			t.Logf("hapsuper %s:\n%s", strings.Join(forms[0], " "), first)
			if c.name != "" && !strings.HasPrefix(first, "usage: hapsuper "+c.name) {
				t.Errorf("help of %s does not start with its usage line", c.name)
			}
			for _, f := range c.flags {
				if !strings.Contains(first, "  --"+f+" ") && !strings.Contains(first, "  --"+f+"\n") {
					t.Errorf("help of %q lacks --%s", c.name, f)
				}
			}
			if c.flags == nil && !strings.Contains(first, "no flags") {
				t.Errorf("help of %s does not say it takes no flags", c.name)
			}
			if strings.Contains(first, "hapsuper demo: HAProxy on") {
				t.Errorf("hapsuper %s started the demo", strings.Join(forms[0], " "))
			}
		})
	}
}

// TestHelp_BadFlagOrCommandSuggests: an unknown command or flag exits 2
// before anything starts, prints nothing on stdout, and names the closest
// command or flag and where help is.
func TestHelp_BadFlagOrCommandSuggests(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string // in stderr
	}{
		{[]string{"--quiet-perod", "1s"}, []string{"did you mean --quiet-period?", "hapsuper run --help"}},
		{[]string{"run", "--grace", "20s"}, []string{"did you mean --grace-period?", "hapsuper run --help"}},
		{[]string{"demo", "--quiet", "1s"}, []string{"did you mean --quiet-period?", "hapsuper demo --help"}},
		{[]string{"status", "--jsn"}, []string{"did you mean --json?", "hapsuper status --help"}},
		{[]string{"check", "--jsn"}, []string{"did you mean --json?", "hapsuper check --help"}},
		{[]string{"version", "--json"}, []string{"unknown flag --json", "hapsuper version --help"}},
		{[]string{"stauts"}, []string{`unknown command "stauts": did you mean status?`, "hapsuper help"}},
		{[]string{"help", "verison"}, []string{"did you mean version?", "hapsuper help"}},
		{[]string{"haproxy", "-f", "haproxy.cfg"}, []string{`unknown command "haproxy"`, "after --"}},
	} {
		out, errs, code := runBinary(t, tc.args...)
		name := "hapsuper " + strings.Join(tc.args, " ")
		if code != 2 {
			t.Errorf("%s: exit %d, want 2; stderr %q", name, code, errs)
		}
		if out != "" {
			t.Errorf("%s: stdout %q, want nothing", name, out)
		}
		for _, w := range tc.want {
			if !strings.Contains(errs, w) {
				t.Errorf("%s: stderr %q lacks %q", name, errs, w)
			}
		}
	}
}
