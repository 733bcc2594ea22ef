package conf

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
)

// Flag is a command-line flag as a person reads it, in a command's --help
// and in the README's flag table (a test keeps that table equal to
// RunFlags). Its text comes from the flag's definition, nowhere else.
type Flag struct {
	Name    string // without the dashes
	Env     string // the environment variable that also sets it; empty: none
	Default string // the default as the flag takes it; empty: none
	Derived string // how the default is computed, when other flags decide it
	Unset   string // what an empty default stands for ("off"); empty: none
	Meaning string // the flag's usage string, without a "(default: …)"
	Bool    bool   // given without a value
	Group   string // what the flag is for (RunGroups); empty: the command's own
}

// DefaultText is the default as help shows it: the rule that derives it,
// the value, what an empty one stands for, or "none".
func (f Flag) DefaultText() string {
	switch {
	case f.Derived != "":
		return f.Derived
	case f.Default == "" && f.Unset != "":
		return f.Unset
	case f.Default == "":
		return "none"
	}
	return f.Default
}

// RunGroups are the run flags by what they are for, in the order help and
// the README's flag table list them; each run flag is in exactly one (a
// test fails on a flag in none).
var RunGroups = []struct {
	Title string
	Flags []string
}{
	{"the drain", []string{"grace-period", "margin", "max-wait", "quiet-period", "withdrawn-quiet-period", "poll-interval", "ignore-frontends", "stop-signals"}},
	{"routing observation", []string{"routing", "kubeconfig", "kube-proxy-healthz-port", "kube-proxy-metrics-port", "kube-proxy-min-sync-period", "kube-proxy-sync-allowance", "kube-proxy-baseline-period"}},
	{"load balancers", []string{"lb-deregistration-delay", "lb-health-check-window", "lb-check-bind", "lb-check-threshold"}},
	{"HAProxy and hapsuper's files", []string{"haproxy-command", "master-socket", "status-socket", "override-file", "create-if-missing", "haproxy-memory-share"}},
	{"logs and metrics", []string{"log-format", "log-level", "metrics-addr"}},
	{"a companion beside HAProxy (an ingress controller)", []string{"companion", "companion-kill-delay", "companion-restart-backoff", "companion-restart-backoff-max", "companion-memory-share"}},
}

// derivedDefaults are the run flags whose default Parse computes from other
// flags once they are all read.
var derivedDefaults = map[string]string{
	"max-wait":               "⅔ of (grace-period − margin)",                                               // derivedMaxWait
	"withdrawn-quiet-period": WithdrawnQuietFloor.String() + " with routing kube-proxy, else quiet-period", // WithdrawnQuiet
}

// RunFlags returns the run command's flags group by group (RunGroups), in
// each group in its order; a flag in no group comes last.
func RunFlags() []Flag {
	s := defaults()
	flags := Describe(newFlagSet(&s), EnvName)
	rank := map[string]int{}
	group := map[string]string{}
	for _, g := range RunGroups {
		for _, name := range g.Flags {
			rank[name], group[name] = len(rank), g.Title
		}
	}
	for i, f := range flags {
		flags[i].Derived = derivedDefaults[f.Name]
		flags[i].Group = group[f.Name]
		if _, ok := rank[f.Name]; !ok {
			rank[f.Name] = len(rank) + len(flags)
		}
	}
	slices.SortStableFunc(flags, func(a, b Flag) int { return rank[a.Name] - rank[b.Name] })
	return flags
}

// Describe returns the flags defined in fs, sorted by name. env names the
// variable that also sets a flag; nil or "" means none. A usage string's
// "(default: …)", which says what an empty default stands for, becomes
// Unset, so that help says the default once.
func Describe(fs *flag.FlagSet, env func(name string) string) []Flag {
	var flags []Flag
	fs.VisitAll(func(f *flag.Flag) {
		d := Flag{Name: f.Name, Default: f.DefValue, Meaning: f.Usage}
		if m := defaultNote.FindStringSubmatchIndex(d.Meaning); m != nil && d.Default == "" {
			d.Unset = d.Meaning[m[2]:m[3]]
			d.Meaning = d.Meaning[:m[0]] + d.Meaning[m[1]:]
		}
		if env != nil {
			d.Env = env(f.Name)
		}
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
			d.Bool = true
		}
		flags = append(flags, d)
	})
	return flags
}

// defaultNote is a usage string's " (default: …)".
var defaultNote = regexp.MustCompile(` \(default: ([^()]*(?:\([^()]*\)[^()]*)*)\)`)

// UsageError is a command line that cannot be read: an unknown flag (the
// message names the closest defined one), a missing or bad value, a stray
// argument. The caller adds where the command's help is.
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// ParseFlags parses args with fs, whose output it discards. It returns
// flag.ErrHelp for -h or --help, and a *UsageError for any other failure.
func ParseFlags(fs *flag.FlagSet, args []string) error {
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return err
	}
	// The flag package's wording, stable since Go 1 (a test fails if it
	// changes), with the flags named as the help names them.
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		return &UsageError{fmt.Errorf("unknown flag --%s%s", name, suggestFlag(fs, name))}
	}
	if name, ok := strings.CutPrefix(msg, "flag needs an argument: -"); ok {
		return &UsageError{fmt.Errorf("flag --%s needs a value", name)}
	}
	if strings.HasPrefix(msg, "invalid value ") {
		return &UsageError{errors.New(strings.Replace(msg, " for flag -", " for --", 1))}
	}
	return &UsageError{err}
}

// suggestFlag is ": did you mean --x?" for the defined flag closest to
// name, or "".
func suggestFlag(fs *flag.FlagSet, name string) string {
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	if c := Closest(name, names); c != "" {
		return ": did you mean --" + c + "?"
	}
	return ""
}

// Closest returns the candidate that s most likely misspells or shortens:
// the shortest candidate that starts with s (3 letters or more), else the
// one the fewest edits away when that is at most a third of s's length (at
// least 1). Case and _ versus - do not count. "" when none is that close.
func Closest(s string, candidates []string) string {
	norm := func(v string) string { return strings.ReplaceAll(strings.ToLower(v), "_", "-") }
	s = norm(s)
	best, bestDist := "", max(1, len([]rune(s))/3)+1
	for _, c := range candidates {
		if len(s) >= 3 && strings.HasPrefix(norm(c), s) && (best == "" || bestDist > 0 || len(c) < len(best)) {
			best, bestDist = c, 0 // a prefix wins over any edit
			continue
		}
		if bestDist == 0 {
			continue
		}
		if d := editDistance(s, norm(c)); d < bestDist {
			best, bestDist = c, d
		}
	}
	return best
}

// editDistance is the number of letters to insert, delete, replace or swap
// with a neighbour to turn a into b (optimal string alignment distance).
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}
