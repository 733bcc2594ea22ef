package main

import (
	"bufio"
	"bytes"
	"os"
	"slices"
	"strings"
	"testing"
)

func runArgs(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = run(args, &out, &errb)
	return code, out.String(), errb.String()
}

// Each command's help, asked for in any of the three ways, is the same text
// on stdout with exit 0, and lists every flag the command parses.
func TestCommandHelp(t *testing.T) {
	for _, c := range commands() {
		t.Run(c.name, func(t *testing.T) {
			var first string
			for i, args := range [][]string{{c.name, "--help"}, {c.name, "-h"}, {"help", c.name}} {
				code, out, errs := runArgs(args...)
				if code != 0 || errs != "" {
					t.Errorf("hapsuper %s: exit %d, stderr %q; want 0 and nothing", strings.Join(args, " "), code, errs)
				}
				if i == 0 {
					first = out
				} else if out != first {
					t.Errorf("hapsuper %s printed another help than hapsuper %s --help:\n%s", strings.Join(args, " "), c.name, out)
				}
			}
			if !strings.HasPrefix(first, "usage: "+c.usageLine()+"\n") {
				t.Errorf("help of %s does not start with its usage line:\n%s", c.name, first)
			}
			flags := c.flags()
			for _, f := range flags {
				if !strings.Contains(first, "  --"+f.Name+" ") && !strings.Contains(first, "  --"+f.Name+"\n") {
					t.Errorf("help of %s lacks --%s:\n%s", c.name, f.Name, first)
				}
			}
			if len(flags) == 0 && !strings.Contains(first, "no flags") {
				t.Errorf("help of %s, which has no flags, does not say so:\n%s", c.name, first)
			}
		})
	}
}

// The commands' flags are the ones they parse: every flag in a command's
// help is accepted by it, and status's help lists its own flags.
func TestHelpFlagsAreParsed(t *testing.T) {
	var status []string
	for _, f := range describeStatusFlags() {
		status = append(status, f.Name)
	}
	for _, want := range []string{"socket", "json", "watch", "interval"} {
		if !slices.Contains(status, want) {
			t.Errorf("status's help lacks --%s, which it parses: %v", want, status)
		}
	}
	c, _ := lookupCommand("run")
	for _, f := range c.flags() {
		if code, _, errs := runArgs("run", "--"+f.Name+"=x", "--help"); strings.Contains(errs, "unknown flag") {
			t.Errorf("run --%s: exit %d, %s", f.Name, code, errs)
		}
	}
}

// Without a command, or with a flag first, help is the overview: every
// command's usage line and run's flags.
func TestOverview(t *testing.T) {
	var first string
	for i, args := range [][]string{{"--help"}, {"-h"}, {"help"}, {"--grace-period", "40s", "-h"}} {
		code, out, errs := runArgs(args...)
		if code != 0 || errs != "" {
			t.Errorf("hapsuper %s: exit %d, stderr %q; want 0 and nothing", strings.Join(args, " "), code, errs)
		}
		if i == 0 {
			first = out
		} else if out != first {
			t.Errorf("hapsuper %s printed another overview than hapsuper --help:\n%s", strings.Join(args, " "), out)
		}
	}
	for _, l := range usageLines() {
		if !strings.Contains(first, "  "+l+"\n") {
			t.Errorf("overview lacks usage line %q:\n%s", l, first)
		}
	}
	c, _ := lookupCommand("run")
	for _, f := range c.flags() {
		if !strings.Contains(first, "  --"+f.Name+" ") {
			t.Errorf("overview lacks run's --%s:\n%s", f.Name, first)
		}
	}
}

// demo --help prints the demo's help and starts nothing.
func TestDemoHelpStartsNothing(t *testing.T) {
	code, out, _ := runArgs("demo", "--help")
	if code != 0 || strings.Contains(out, "hapsuper demo: HAProxy on") || !strings.HasPrefix(out, "usage: hapsuper demo") {
		t.Fatalf("demo --help: exit %d, stdout:\n%s", code, out)
	}
	for _, a := range demoArgs("$TMPDIR") {
		if !strings.Contains(out, a) {
			t.Errorf("demo's help does not show what it sets (%s):\n%s", a, out)
		}
	}
}

// A command line that cannot be read exits 2, names the closest command or
// flag, and says where help is.
func TestUsageErrors(t *testing.T) {
	tests := []struct {
		args []string
		want []string // in stderr
	}{
		{[]string{"--quiet-perod", "1s"}, []string{"unknown flag --quiet-perod: did you mean --quiet-period?", "'hapsuper run --help'"}},
		{[]string{"run", "--quiet", "1s"}, []string{"did you mean --quiet-period?", "'hapsuper run --help'"}},
		{[]string{"run", "--grace-period"}, []string{"flag --grace-period needs a value", "'hapsuper run --help'"}},
		{[]string{"run", "--grace-period", "abc"}, []string{`invalid value "abc" for --grace-period: not a duration`, "'hapsuper run --help'"}},
		{[]string{"demo", "--grace", "1s"}, []string{"did you mean --grace-period?", "'hapsuper demo --help'"}},
		{[]string{"status", "--jsn"}, []string{"unknown flag --jsn: did you mean --json?", "'hapsuper status --help'"}},
		{[]string{"status", "now"}, []string{`unexpected argument "now"`, "'hapsuper status --help'"}},
		{[]string{"version", "--short"}, []string{"unknown flag --short", "'hapsuper version --help'"}},
		{[]string{"stauts"}, []string{`unknown command "stauts": did you mean status?`, "'hapsuper help'"}},
		{[]string{"verison"}, []string{"did you mean version?"}},
		{[]string{"help", "dmeo"}, []string{`unknown command "dmeo": did you mean demo?`}},
		{[]string{"help", "run", "status"}, []string{`unexpected argument "status"`, "'hapsuper help --help'"}},
		{[]string{"haproxy", "-f", "x.cfg"}, []string{`unknown command "haproxy"`, "put it after --"}},
		{[]string{"--grace-period", "3s", "haproxy"}, []string{`unexpected argument "haproxy"`, "after --", "'hapsuper run --help'"}},
		{[]string{"check", "--", "haproxy", "-f", "x.cfg", "--json"}, []string{"--json after -- would be an argument of HAProxy's command", "hapsuper check --json -- haproxy -f x.cfg", "'hapsuper check --help'"}},
	}
	for _, tt := range tests {
		code, out, errs := runArgs(tt.args...)
		if code != 2 {
			t.Errorf("hapsuper %s: exit %d, want 2; stderr %q", strings.Join(tt.args, " "), code, errs)
		}
		if out != "" {
			t.Errorf("hapsuper %s: stdout %q, want nothing", strings.Join(tt.args, " "), out)
		}
		for _, w := range tt.want {
			if !strings.Contains(errs, w) {
				t.Errorf("hapsuper %s: stderr %q lacks %q", strings.Join(tt.args, " "), errs, w)
			}
		}
	}
}

// The README's Usage section shows the usage lines help prints.
func TestREADMEUsage(t *testing.T) {
	f, err := os.Open("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var got []string
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			in = line == "## Usage"
			continue
		}
		if !in {
			continue
		}
		if l, ok := strings.CutPrefix(line, "    "); ok {
			got = append(got, l)
		} else if len(got) > 0 {
			break // the end of the first code block
		}
	}
	if want := usageLines(); !slices.Equal(got, want) {
		t.Errorf("README ## Usage shows\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
