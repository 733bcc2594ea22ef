package check

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/hapsuper/hapsuper/conf"
	"github.com/hapsuper/hapsuper/haproxy"
)

// haproxyCheckTimeout bounds `haproxy -c`; a large configuration with
// many certificates parses in a few seconds.
const haproxyCheckTimeout = 20 * time.Second

// configRows checks the HAProxy that HAProxy's command runs and the
// configuration it loads: its version, HAProxy's own parse when its binary
// is here, then hapsuper's inspection (the same warnings `run` logs at
// start), one row per frontend.
func configRows(ctx context.Context, r *Report, s conf.Settings) {
	haproxyVersionRows(ctx, r, s.HAProxy)
	files, err := haproxy.ConfigFiles(s)
	if err != nil {
		r.add(AreaConfig, "files", Fail, err.Error(), "point HAProxy's command after -- at the configuration: -- haproxy -f <file>")
		return
	}
	r.add(AreaConfig, "files", OK, strings.Join(files, ", "), "")
	haproxyParse(ctx, r, s.HAProxy)

	in, err := haproxy.Inspect(files, s)
	if err != nil {
		r.add(AreaConfig, "inspection", Fail, err.Error(), "fix the configuration or --ignore-frontends as the error says")
		return
	}
	warned := map[string]bool{}
	for _, fe := range in.Frontends {
		counted := "counted"
		if slices.Contains(s.IgnoreFrontends, fe.Name) {
			counted = "ignored (--ignore-frontends)"
		}
		subject := "frontend " + fe.Name
		var problems []string
		for _, w := range in.Warnings {
			if strings.HasPrefix(w, subject+":") {
				problems = append(problems, w)
				warned[w] = true
			}
		}
		if len(problems) == 0 {
			r.add(AreaConfig, subject, OK, fe.Mode+", "+counted+": "+softStop(fe), "")
			continue
		}
		for _, w := range problems {
			detail, fix := splitFix(strings.TrimPrefix(w, subject+": "))
			r.add(AreaConfig, subject, Warn, fe.Mode+", "+counted+": "+detail, fix)
		}
	}
	if len(in.Frontends) == 0 {
		r.add(AreaConfig, "frontends", Warn, "no frontend or listen section: nothing to drain", "check the -f files of HAProxy's command")
	}
	hardStop(r, s, in, warned)
}

// softStop says how the soft stop ends a frontend's connections. An
// ignored frontend (probes, stats) gets no inspection warning: its row says
// what it has.
func softStop(fe haproxy.Frontend) string {
	switch {
	case fe.Mode != "http":
		return "soft stop leaves established connections to finish"
	case !fe.Graceful:
		return "soft stop closes idle keep-alive connections (no idle-close-on-response)"
	case fe.IdleBound == 0:
		return "soft stop is graceful (idle-close-on-response); nothing ends an idle connection before the hard stop"
	}
	return fmt.Sprintf("soft stop is graceful (idle-close-on-response); idle connections end within %v", fe.IdleBound)
}

// hardStop is the row of hard-stop-after against the stop budget, and of
// any inspection warning not about a frontend.
func hardStop(r *Report, s conf.Settings, in haproxy.Inspection, warned map[string]bool) {
	found := false
	for _, w := range in.Warnings {
		if warned[w] {
			continue
		}
		detail, fix := splitFix(w)
		r.add(AreaConfig, "hard-stop-after", Warn, detail, fix)
		found = true
	}
	if found {
		return
	}
	if in.HardStopAfter == 0 {
		r.add(AreaConfig, "hard-stop-after", OK, fmt.Sprintf("unset: hapsuper's override file sets it to the stop budget %v", s.Budget()), "")
		return
	}
	r.add(AreaConfig, "hard-stop-after", OK, fmt.Sprintf("%v, within the stop budget %v", in.HardStopAfter, s.Budget()), "")
}

// splitFix splits an inspection warning, "<what>: <what to change>", at
// its last ": ".
func splitFix(w string) (detail, fix string) {
	i := strings.LastIndex(w, ": ")
	if i < 0 {
		return w, ""
	}
	return w[:i], w[i+2:]
}

// haproxyParse runs HAProxy's command with -c (check the configuration
// and exit) when its binary is here: the user's own arguments, so that -C,
// -L and the files after -- read as they will at start.
func haproxyParse(ctx context.Context, r *Report, argv []string) {
	path, err := exec.LookPath(argv[0])
	if err != nil {
		r.add(AreaConfig, "haproxy -c", Skip, fmt.Sprintf("skipped: no HAProxy binary %q here", argv[0]), "")
		return
	}
	out, err := haproxy.RunHAProxy(ctx, haproxyCheckTimeout, path, append([]string{"-c"}, argv[1:]...)...)
	text := strings.TrimSpace(string(out))
	var exit *exec.ExitError
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		r.add(AreaConfig, "haproxy -c", Fail, fmt.Sprintf("%s -c did not finish within %v", path, haproxyCheckTimeout), "run it by hand to see where it stops")
	case errors.As(err, &exit):
		r.add(AreaConfig, "haproxy -c", Fail, fmt.Sprintf("%s -c exited %d: %s", path, exit.ExitCode(), tagged(text, "[ALERT]")), "fix the configuration as HAProxy says")
	case err != nil:
		r.add(AreaConfig, "haproxy -c", Fail, fmt.Sprintf("run %s -c: %v", path, err), "check that the binary runs here")
	case strings.Contains(text, "[WARNING]"):
		r.add(AreaConfig, "haproxy -c", Warn, "valid, with warnings: "+tagged(text, "[WARNING]"), "fix what HAProxy warns about")
	default:
		r.add(AreaConfig, "haproxy -c", OK, "valid ("+path+")", "")
	}
}

// tagged is the first line of HAProxy's output that carries tag, without
// the tag and the pid; the last line when none does.
func tagged(text, tag string) string {
	lines := strings.Split(text, "\n")
	for _, l := range lines {
		if _, rest, ok := strings.Cut(l, tag); ok {
			if _, msg, ok := strings.Cut(rest, ") : "); ok {
				return strings.TrimSpace(msg)
			}
			return strings.TrimSpace(rest)
		}
	}
	return lines[len(lines)-1]
}
