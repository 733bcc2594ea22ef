package integration

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestReadiness_NotifyOnEveryBuild: hapsuper starts every HAProxy of the
// matrix with -Ws and a NOTIFY_SOCKET, and takes its readiness from
// READY=1 (via=notify), not from polling the master CLI. From 3.1 on every
// build has -Ws although `-vv` no longer lists USE_SYSTEMD; 2.6 and 3.0
// builds have it only with USE_SYSTEMD, which Debian's do.
func TestReadiness_NotifyOnEveryBuild(t *testing.T) {
	eachHAProxy(t, func(t *testing.T, h haproxyVersion) {
		if !h.version.AtLeast(3, 1, 0) && !buildHasSystemd(t, h) {
			t.Skipf("%s was built without USE_SYSTEMD: it has no -Ws", h.line)
		}
		cfg := newConfig(t)
		s := serve(t, h, cfg, fast.flags()...)

		started := s.waitLog("haproxy started", time.Second)
		if started.Fields["notify"] != true {
			t.Errorf("haproxy started with notify=%v, want true", started.Fields["notify"])
		}
		var argv []string
		for _, a := range started.Fields["argv"].([]any) {
			argv = append(argv, a.(string))
		}
		if !slices.Contains(argv, "-Ws") || slices.Contains(argv, "-W") {
			t.Errorf("HAProxy's argv %q: want -Ws and no -W", argv)
		}
		ready := s.waitLog("haproxy ready", time.Second)
		if via := ready.Str("via"); via != "notify" {
			t.Errorf("haproxy ready via %q, want notify (READY=1 on the NOTIFY_SOCKET)", via)
		}
		s.stopClean()
	})
}

// buildHasSystemd reports whether `haproxy -vv` of h lists USE_SYSTEMD,
// read here rather than by conf's rule, which this test checks.
func buildHasSystemd(t *testing.T, h haproxyVersion) bool {
	t.Helper()
	cmd := exec.Command(haproxyBin, "-vv")
	if h.root != "" {
		cmd = exec.Command("chroot", h.root, haproxyBin, "-vv")
	}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v", strings.Join(cmd.Args, " "), err)
	}
	return strings.Contains(string(out), "USE_SYSTEMD=1")
}
