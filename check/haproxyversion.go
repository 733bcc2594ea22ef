package check

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"time"

	"github.com/hapsuper/hapsuper/haproxy"
)

// haproxyVersionTimeout bounds `haproxy -vv`, which prints and exits.
const haproxyVersionTimeout = 5 * time.Second

// haproxyVersionRows names the HAProxy version HAProxy's command runs (as
// `run` reads it, from `haproxy -vv`) and how `run` will learn that it is
// ready, and WARNs for every known upstream regression of that release:
// what breaks and the release that fixes it (haproxy.KnownRegressions).
func haproxyVersionRows(ctx context.Context, r *Report, argv []string) {
	const subject = "haproxy version"
	path, err := exec.LookPath(argv[0])
	if err != nil {
		r.add(AreaConfig, subject, Skip, fmt.Sprintf("skipped: no HAProxy binary %q here", argv[0]), "")
		return
	}
	out, err := haproxy.RunHAProxy(ctx, haproxyVersionTimeout, path, "-vv")
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		r.add(AreaConfig, subject, Fail, fmt.Sprintf("%s -vv did not finish within %v", path, haproxyVersionTimeout), "run it by hand to see where it stops")
		return
	case err != nil:
		r.add(AreaConfig, subject, Fail, fmt.Sprintf("run %s -vv: %v", path, err), "check that the binary runs here")
		return
	}
	v, err := haproxy.ParseVersion(string(out))
	if err != nil {
		r.add(AreaConfig, subject, Fail, err.Error(), "give HAProxy's binary first after --")
		return
	}
	ready := "ready when it says READY=1 (-Ws)"
	if !v.SupportsNotify() {
		ready = "built without USE_SYSTEMD: no -Ws, ready when its master CLI shows a worker"
	}
	found := fmt.Sprintf("HAProxy %s (%s), %s", v, path, ready)
	rs := v.Regressions()
	if len(rs) == 0 {
		r.add(AreaConfig, subject, OK, found, "")
		return
	}
	for _, reg := range rs {
		r.add(AreaConfig, subject, Warn,
			fmt.Sprintf("%s; %s has an upstream bug of %s: %s", found, v, reg.Affected(), reg.Breaks),
			fmt.Sprintf("upgrade HAProxy to %s or later, the first %s release with the fix", reg.FixedIn(), v.Branch()))
	}
}
