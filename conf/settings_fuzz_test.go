package conf

import (
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fuzzArgs splits a fuzzed command line into arguments at spaces and NULs,
// keeping empty arguments ("a  b" is "a", "", "b"); "" is no argument.
func fuzzArgs(line string) []string {
	if line == "" {
		return nil
	}
	return strings.Split(strings.ReplaceAll(line, " ", "\x00"), "\x00")
}

// fuzzedEnv are the variables FuzzParse sets, in the order of its string
// arguments after the command line.
var fuzzedEnv = []string{
	"HAPSUPER_GRACE_PERIOD", "HAPSUPER_MARGIN", "HAPSUPER_MAX_WAIT",
	"HAPSUPER_QUIET_PERIOD", "HAPSUPER_POLL_INTERVAL", "HAPSUPER_STOP_SIGNALS",
}

// FuzzParse: any arguments and values of the timing and signal variables
// give an error and zero Settings, or Settings that hold the package doc's
// rules: QuietPeriod < MaxWait < GracePeriod − Margin, 10ms ≤ PollInterval <
// QuietPeriod, stop signals that can start a drain, and a HAProxy command
// whose first word is the binary (haproxy.FuzzCommand checks the command
// line built from it).
//
// Seeds: the image's command (Dockerfile ENTRYPOINT + CMD), the variables
// of deploy/ and the README's examples, and the boundaries of each rule.
func FuzzParse(f *testing.F) {
	seeds := []struct{ args, grace, margin, maxWait, quiet, poll, signals string }{
		{"", "", "", "", "", "", ""},
		{"-- haproxy -f /usr/local/etc/haproxy/haproxy.cfg", "30s", "", "", "", "", ""},         // deploy/base
		{"-- haproxy -f /usr/local/etc/haproxy/haproxy.cfg", "60s", "", "", "", "", ""},         // deploy/haproxy-ingress
		{"--routing=off --log-format json --ignore-frontends probe", "30s", "", "", "", "", ""}, // deploy/base, as flags
		{"-- -f x.cfg", "", "", "", "", "", "SIGUSR1"},                                          // docker run IMAGE -f x.cfg
		{"--master-socket /run/m.sock -- haproxy -S /run/m.sock,mode,600 -f a.cfg -- b.cfg", "", "", "", "", "", "term,usr1,15"},
		{"-- haproxy -W -db -S unix@/run/x.sock -f /etc/haproxy", "", "", "", "", "", ""},
		{"--grace-period=62s --margin=2s", "", "", "", "", "", ""},
		{"--max-wait 28s", "", "", "", "", "", ""},
		{"", "2s", "1s", "999ms", "998ms", "997ms", "SIGHUP"},
		{"", "2562047h47m16.854775807s", "1ns", "", "", "", ""},
		{"--poll-interval 10ms --quiet-period 11ms --max-wait 12ms --grace-period 14ms --margin 1ms", "", "", "", "", "", "64"},
		{"--stop-signals", "", "", "", "", "", "KILL"},
		{"-h", "", "", "", "", "", ""},
		{"--kube-proxy-healthz-port 0x2800 --kube-proxy-min-sync-period 500ms --routing Kube-Proxy", "", "", "", "", "", ""},
		{"-- haproxy -S", "", "", "", "", "", ""},
		{"--master-socket= --status-socket= --override-file=", "", "", "", "", "", ""},
	}
	for _, s := range seeds {
		f.Add(s.args, s.grace, s.margin, s.maxWait, s.quiet, s.poll, s.signals)
	}
	f.Fuzz(func(t *testing.T, args, grace, margin, maxWait, quiet, poll, signals string) {
		values := []string{grace, margin, maxWait, quiet, poll, signals}
		lookupEnv := func(name string) (string, bool) { // an empty seed value is an unset variable
			if i := slices.Index(fuzzedEnv, name); i >= 0 && values[i] != "" {
				return values[i], true
			}
			return "", false
		}
		argv := fuzzArgs(args)
		s, err := Parse(argv, lookupEnv)
		if err != nil {
			if err.Error() == "" || !reflect.DeepEqual(s, Settings{}) {
				t.Fatalf("Parse(%q) failed with %q and settings %+v", argv, err, s)
			}
			return
		}
		checkSettings(t, argv, s)
	})
}

// checkSettings fails t if s breaks a rule that Parse promises.
func checkSettings(t *testing.T, argv []string, s Settings) {
	t.Helper()
	fail := func(rule string) { t.Fatalf("Parse(%q) broke %s: %v", argv, rule, s) }
	if s.GracePeriod <= 0 || s.Margin <= 0 || s.QuietPeriod <= 0 {
		fail("positive grace period, margin and quiet period")
	}
	if !(s.QuietPeriod < s.MaxWait && s.MaxWait < s.GracePeriod-s.Margin) {
		fail("QuietPeriod < MaxWait < GracePeriod − Margin")
	}
	if s.Budget() != s.GracePeriod-s.Margin || s.Budget() <= 0 {
		fail("Budget = GracePeriod − Margin > 0")
	}
	if !(10*time.Millisecond <= s.PollInterval && s.PollInterval < s.QuietPeriod) {
		fail("10ms ≤ PollInterval < QuietPeriod")
	}
	if len(s.StopSignals) == 0 {
		fail("some stop signal")
	}
	for _, sig := range s.StopSignals {
		switch sig {
		case syscall.SIGKILL, syscall.SIGSTOP, syscall.SIGCHLD, syscall.SIGURG, syscall.SIGPIPE, syscall.SIGPROF,
			syscall.SIGSEGV, syscall.SIGBUS, syscall.SIGFPE, syscall.SIGILL, syscall.SIGTRAP, syscall.SIGSYS:
			fail("stop signals that can be caught and that neither the reaper nor the Go runtime uses")
		}
		if sig < 1 || sig > 64 {
			fail("stop signals in 1..64")
		}
	}
	if len(s.HAProxy) == 0 || strings.HasPrefix(s.HAProxy[0], "-") {
		fail("a HAProxy command that starts with the binary")
	}
	if !slices.Contains([]string{"text", "json"}, s.LogFormat) || !slices.Contains(routingModes, s.Routing) {
		fail("a known log format and routing mode")
	}
	if !slices.Contains([]slog.Level{slog.LevelDebug, slog.LevelInfo, slog.LevelWarn, slog.LevelError}, s.LogLevel) {
		fail("a known log level")
	}
	if s.KubeProxyHealthzPort < 1 || s.KubeProxyHealthzPort > 65535 || s.KubeProxyMinSyncPeriod < 500*time.Millisecond {
		fail("a TCP port and a min sync period of at least 500ms for kube-proxy")
	}
	_ = s.String() // must not panic
}
