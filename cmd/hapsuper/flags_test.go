package main

import (
	"strings"
	"testing"

	"github.com/hapsuper/hapsuper/conf"
)

func TestWriteFlags(t *testing.T) {
	var b strings.Builder
	writeFlags(&b, []conf.Flag{
		{Name: "grace-period", Env: "HAPSUPER_GRACE_PERIOD", Default: "30s", Meaning: "the pod's grace"},
		{Name: "json", Bool: true, Default: "false", Meaning: "print JSON"},
		{Name: "kubeconfig", Meaning: "a kubeconfig"},
		{Name: "routing", Env: "HAPSUPER_ROUTING", Default: "auto", Meaning: "the mode", Group: "routing observation"},
		{Name: "metrics-addr", Env: "HAPSUPER_METRICS_ADDR", Unset: "off", Meaning: "the address", Group: "routing observation"},
	})
	want := `  --grace-period (HAPSUPER_GRACE_PERIOD, default 30s)
        the pod's grace
  --json
        print JSON
  --kubeconfig (default none)
        a kubeconfig
 routing observation:
  --routing (HAPSUPER_ROUTING, default auto)
        the mode
  --metrics-addr (HAPSUPER_METRICS_ADDR, default off)
        the address
`
	if b.String() != want {
		t.Errorf("writeFlags wrote\n%s\nwant\n%s", b.String(), want)
	}
}

// run's help says each flag's default once, and lists the flags by what
// they are for: each group's heading once, the drain's timing first and the
// companion's flags together, after the flags of HAProxy's own command.
func TestRunHelpGroups(t *testing.T) {
	var b strings.Builder
	writeFlags(&b, conf.RunFlags())
	help := "\n" + b.String()
	for _, f := range conf.RunFlags() {
		i := strings.Index(help, "  --"+f.Name+" ")
		entry := help[i:]
		if next := strings.Index(entry[2:], "\n  --"); next >= 0 {
			entry = entry[:next+2]
		}
		if n := strings.Count(entry, "(default") + strings.Count(entry, ", default") + strings.Count(entry, "default:"); n != 1 {
			t.Errorf("--%s says \"default\" %d times:\n%s", f.Name, n, entry)
		}
	}
	last := -1
	for _, g := range conf.RunGroups {
		i := strings.Index(help, "\n "+g.Title+":\n")
		if i < 0 || strings.Count(help, "\n "+g.Title+":\n") != 1 {
			t.Errorf("help lists the heading %q %d times, want once", g.Title, strings.Count(help, "\n "+g.Title+":\n"))
			continue
		}
		if i < last {
			t.Errorf("help lists %q out of conf.RunGroups' order", g.Title)
		}
		last = i
		for _, name := range g.Flags {
			if j := strings.Index(help, "  --"+name+" "); j < i {
				t.Errorf("--%s comes before its group's heading %q", name, g.Title)
			}
		}
	}
	if strings.Index(help, "--grace-period ") > strings.Index(help, "--companion ") {
		t.Errorf("help lists the companion's flags before --grace-period:\n%s", help)
	}
}
