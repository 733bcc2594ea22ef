package conf

import (
	"errors"
	"flag"
	"strings"
	"testing"
)

func TestClosest(t *testing.T) {
	names := []string{"demo", "grace-period", "quiet-period", "kubeconfig", "kube-proxy-healthz-port", "json", "watch"}
	tests := []struct{ in, want string }{
		{"quiet-perod", "quiet-period"},    // one letter dropped
		{"quiet", "quiet-period"},          // shortened
		{"grace_period", "grace-period"},   // _ for -
		{"Grace-Period", "grace-period"},   // case
		{"qiuet-period", "quiet-period"},   // two letters swapped: two edits
		{"kube", "kubeconfig"},             // the shortest it shortens
		{"jsn", "json"},                    // one edit in a short word
		{"js", ""},                         // too short to shorten, two edits
		{"interval", ""},                   // nothing close
		{"period", ""},                     // a suffix is not a prefix
		{"xatch", "watch"},                 // one edit
		{"quiet-period-x", "quiet-period"}, // one too many
	}
	for _, tt := range tests {
		if got := Closest(tt.in, names); got != tt.want {
			t.Errorf("Closest(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestParseFlagsUnknownFlag(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.Bool("json", false, "")
	fs.Duration("interval", 0, "")
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--jsn"}, "unknown flag --jsn: did you mean --json?"},
		{[]string{"-intervall=1s"}, "unknown flag --intervall: did you mean --interval?"},
		{[]string{"--socket", "x"}, "unknown flag --socket"},
		{[]string{"--interval"}, "flag --interval needs a value"},
		{[]string{"--interval", "soon"}, `invalid value "soon" for --interval: `},
	}
	for _, tt := range tests {
		err := ParseFlags(fs, tt.args)
		var ue *UsageError
		if !errors.As(err, &ue) {
			t.Errorf("ParseFlags(%q) = %v, want a *UsageError", tt.args, err)
			continue
		}
		if !strings.HasPrefix(err.Error(), tt.want) {
			t.Errorf("ParseFlags(%q) = %q, want it to start with %q", tt.args, err, tt.want)
		}
		if tt.want == "unknown flag --socket" && strings.Contains(err.Error(), "did you mean") {
			t.Errorf("ParseFlags(%q) = %q suggests a flag that is not close", tt.args, err)
		}
	}
	for _, arg := range []string{"-h", "--help", "-help"} {
		if err := ParseFlags(fs, []string{arg}); !errors.Is(err, flag.ErrHelp) {
			t.Errorf("ParseFlags(%q) = %v, want flag.ErrHelp", arg, err)
		}
	}
}

// A command line that cannot be read is a UsageError (the command adds where
// its help is); settings that do not fit together are not.
func TestParseUsageErrors(t *testing.T) {
	for _, args := range [][]string{{"--grace", "3s"}, {"--grace-period"}, {"haproxy"}} {
		var ue *UsageError
		if _, err := Parse(args, nil); !errors.As(err, &ue) {
			t.Errorf("Parse(%q) = %v, want a *UsageError", args, err)
		}
	}
	var ue *UsageError
	if _, err := Parse([]string{"--quiet-period", "30s"}, nil); err == nil || errors.As(err, &ue) {
		t.Errorf("Parse(--quiet-period 30s) = %v, want an error that is not a *UsageError", err)
	}
}

func TestRunFlags(t *testing.T) {
	flags := RunFlags()
	byName := map[string]Flag{}
	for _, f := range flags {
		byName[f.Name] = f
		if f.Env != EnvName(f.Name) {
			t.Errorf("--%s: Env %q, want %q", f.Name, f.Env, EnvName(f.Name))
		}
		if f.Meaning == "" {
			t.Errorf("--%s has no meaning", f.Name)
		}
	}
	for name := range derivedDefaults {
		if _, ok := byName[name]; !ok {
			t.Errorf("derivedDefaults names --%s, which is not a run flag", name)
		}
	}
	for name, want := range map[string]string{
		"grace-period":     "30s",
		"max-wait":         "⅔ of (grace-period − margin)",
		"ignore-frontends": "none",
		"metrics-addr":     "off",
		"kubeconfig":       "in-cluster credentials",
		"stop-signals":     "SIGTERM,SIGUSR1",
		"log-level":        "info",
	} {
		if got := byName[name].DefaultText(); got != want {
			t.Errorf("--%s default shown as %q, want %q", name, got, want)
		}
	}
}
