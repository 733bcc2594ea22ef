package conf

import (
	"errors"
	"flag"
	"log/slog"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"
)

func env(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
}

func TestParseDefaults(t *testing.T) {
	got, err := Parse(nil, nil)
	if err != nil {
		t.Fatalf("Parse(nil): %v", err)
	}
	want := Settings{
		GracePeriod: 30 * time.Second,
		QuietPeriod: 2 * time.Second,
		// WithdrawnQuietPeriod unset: WithdrawnQuiet derives it per mode.
		MaxWait:      18666 * time.Millisecond, // two thirds of 30s − 2s
		Margin:       2 * time.Second,
		PollInterval: 100 * time.Millisecond,
		MasterSocket: "/var/run/hapsuper/master.sock",
		StatusSocket: "/var/run/hapsuper/status.sock",
		OverrideFile: "/var/run/hapsuper/override.cfg",
		StopSignals:  []syscall.Signal{syscall.SIGTERM, syscall.SIGUSR1},
		LogFormat:    "text",
		LogLevel:     slog.LevelInfo,
		HAProxy:      []string{"haproxy", "-f", "/usr/local/etc/haproxy/haproxy.cfg"},
		Routing:      RoutingAuto,

		KubeProxyHealthzPort:    10256,
		KubeProxyMinSyncPeriod:  time.Second,
		KubeProxySyncAllowance:  250 * time.Millisecond,
		KubeProxyBaselinePeriod: 90 * time.Second,

		CompanionKillDelay:  4 * time.Second,
		CompanionBackoff:    500 * time.Millisecond,
		CompanionBackoffMax: 30 * time.Second,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Parse(nil) =\n%+v\nwant\n%+v", got, want)
	}
}

func TestParse(t *testing.T) {
	tests := []struct {
		name  string
		args  []string
		env   map[string]string
		check func(Settings) any // returns the field under test
		want  any
	}{
		{"grace flag", []string{"--grace-period", "60s"}, nil,
			func(s Settings) any { return s.GracePeriod }, 60 * time.Second},
		{"max wait derived from grace and margin", []string{"--grace-period=62s", "--margin=2s"}, nil,
			func(s Settings) any { return s.MaxWait }, 40 * time.Second},
		{"max wait derived from env grace", nil, map[string]string{"HAPSUPER_GRACE_PERIOD": "32s"},
			func(s Settings) any { return s.MaxWait }, 20 * time.Second},
		{"explicit max wait", []string{"-max-wait", "25s"}, nil,
			func(s Settings) any { return s.MaxWait }, 25 * time.Second},
		{"env quiet period", nil, map[string]string{"HAPSUPER_QUIET_PERIOD": "5s"},
			func(s Settings) any { return s.QuietPeriod }, 5 * time.Second},
		{"flag wins over env", []string{"--quiet-period", "3s"}, map[string]string{"HAPSUPER_QUIET_PERIOD": "5s"},
			func(s Settings) any { return s.QuietPeriod }, 3 * time.Second},
		{"withdrawn quiet follows quiet outside kube-proxy mode", []string{"--quiet-period", "3s", "--routing", "endpointslices"}, nil,
			func(s Settings) any { return s.WithdrawnQuiet(s.Routing) }, 3 * time.Second},
		{"withdrawn quiet at the floor in kube-proxy mode", []string{"--quiet-period", "3s"}, nil,
			func(s Settings) any { return s.WithdrawnQuiet(RoutingKubeProxy) }, 500 * time.Millisecond},
		{"withdrawn quiet covers a longer in-flight window", []string{"--poll-interval", "400ms", "--quiet-period", "3s"}, nil,
			func(s Settings) any { return s.WithdrawnQuiet(RoutingKubeProxy) }, 1050 * time.Millisecond},
		{"withdrawn quiet at most the quiet period", []string{"--poll-interval", "400ms", "--quiet-period", "800ms"}, nil,
			func(s Settings) any { return s.WithdrawnQuiet(RoutingKubeProxy) }, 800 * time.Millisecond},
		{"withdrawn quiet set wins in every mode", []string{"--withdrawn-quiet-period", "1s"}, nil,
			func(s Settings) any {
				return []time.Duration{s.WithdrawnQuiet(RoutingKubeProxy), s.WithdrawnQuiet(RoutingEndpointSlices)}
			}, []time.Duration{time.Second, time.Second}},
		{"withdrawn quiet from env", nil, map[string]string{"HAPSUPER_WITHDRAWN_QUIET_PERIOD": "500ms"},
			func(s Settings) any { return s.WithdrawnQuietPeriod }, 500 * time.Millisecond},
		{"ignore frontends", []string{"--ignore-frontends", "stats, healthz,,"}, nil,
			func(s Settings) any { return s.IgnoreFrontends }, []string{"stats", "healthz"}},
		{"ignore frontends from env", nil, map[string]string{"HAPSUPER_IGNORE_FRONTENDS": "stats"},
			func(s Settings) any { return s.IgnoreFrontends }, []string{"stats"}},
		{"stop signals mixed forms", []string{"--stop-signals", "term,SIGusr1,2"}, nil,
			func(s Settings) any { return s.StopSignals }, []syscall.Signal{syscall.SIGTERM, syscall.SIGUSR1, syscall.SIGINT}},
		{"stop signals from env", nil, map[string]string{"HAPSUPER_STOP_SIGNALS": "SIGUSR1"},
			func(s Settings) any { return s.StopSignals }, []syscall.Signal{syscall.SIGUSR1}},
		{"log format", []string{"--log-format", "JSON"}, nil,
			func(s Settings) any { return s.LogFormat }, "json"},
		{"log level from env", nil, map[string]string{"HAPSUPER_LOG_LEVEL": "debug"},
			func(s Settings) any { return s.LogLevel }, slog.LevelDebug},
		{"sockets and override file", []string{"--status-socket", "/s", "--override-file", "/o.cfg", "--master-socket", "/m"}, nil,
			func(s Settings) any { return []string{s.StatusSocket, s.OverrideFile, s.MasterSocket} }, []string{"/s", "/o.cfg", "/m"}},
		{"haproxy command after --", []string{"--margin", "1s", "--", "/usr/sbin/haproxy", "-f", "/etc/haproxy/haproxy.cfg"}, nil,
			func(s Settings) any { return s.HAProxy }, []string{"/usr/sbin/haproxy", "-f", "/etc/haproxy/haproxy.cfg"}},
		{"haproxy flags without the binary, as in docker run IMAGE -f x.cfg", []string{"--", "-f", "/x.cfg"}, nil,
			func(s Settings) any { return s.HAProxy }, []string{"haproxy", "-f", "/x.cfg"}},
		{"user -S reused as master socket", []string{"--", "haproxy", "-S", "/run/x.sock,level,admin", "-f", "h.cfg"}, nil,
			func(s Settings) any { return s.MasterSocket }, "/run/x.sock"},
		{"user -S with unix@ prefix", []string{"--", "haproxy", "-S", "unix@/run/y.sock", "-f", "h.cfg"}, nil,
			func(s Settings) any { return s.MasterSocket }, "/run/y.sock"},
		{"sync allowance", []string{"--kube-proxy-sync-allowance", "600ms", "--kube-proxy-min-sync-period", "2s"}, nil,
			func(s Settings) any { return s.KubeProxySyncAllowance }, 600 * time.Millisecond},
		{"sync allowance from env", nil, map[string]string{"HAPSUPER_KUBE_PROXY_SYNC_ALLOWANCE": "900ms"},
			func(s Settings) any { return s.KubeProxySyncAllowance }, 900 * time.Millisecond},
		{"health-check window from env", nil, map[string]string{"HAPSUPER_LB_HEALTH_CHECK_WINDOW": "3s"},
			func(s Settings) any { return s.LBHealthCheckWindow }, 3 * time.Second},
		{"load balancer delay from env", []string{"--grace-period", "90s"}, map[string]string{"HAPSUPER_LB_DEREGISTRATION_DELAY": "30s"},
			func(s Settings) any { return s.LBDeregistrationDelay }, 30 * time.Second},
		{"same --master-socket and -S agree", []string{"--master-socket", "/run/x.sock", "--", "haproxy", "-S", "/run/x.sock"}, nil,
			func(s Settings) any { return s.MasterSocket }, "/run/x.sock"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Parse(tt.args, env(tt.env))
			if err != nil {
				t.Fatalf("Parse(%q): %v", tt.args, err)
			}
			if got := tt.check(s); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Parse(%q) gave %v, want %v", tt.args, got, tt.want)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want []string // substrings of the error
	}{
		{"unknown flag", []string{"--grace", "30s"}, nil,
			[]string{"unknown flag --grace: did you mean --grace-period?"}},
		{"bad duration flag", []string{"--quiet-period", "2"}, nil,
			[]string{"-quiet-period", "such as 30s"}},
		{"bad duration env", nil, map[string]string{"HAPSUPER_GRACE_PERIOD": "thirty"},
			[]string{"HAPSUPER_GRACE_PERIOD", `"thirty"`, "such as 30s"}},
		{"positional argument", []string{"haproxy"}, nil,
			[]string{`unexpected argument "haproxy"`, "after --"}},
		{"empty command", []string{"--"}, nil,
			[]string{"nothing after --"}},
		{"zero grace", []string{"--grace-period", "0s"}, nil,
			[]string{"--grace-period 0s", "more than 0"}},
		{"negative quiet", []string{"--quiet-period", "-1s"}, nil,
			[]string{"--quiet-period -1s", "more than 0"}},
		{"zero margin from env", nil, map[string]string{"HAPSUPER_MARGIN": "0s"},
			[]string{"HAPSUPER_MARGIN=0s", "more than 0"}},
		{"zero max wait", []string{"--max-wait", "0s"}, nil,
			[]string{"--max-wait 0s", "more than 0"}},
		{"poll too fast", []string{"--poll-interval", "5ms"}, nil,
			[]string{"--poll-interval 5ms", "minimum of 10ms"}},
		{"margin not below grace", []string{"--grace-period", "2s"}, nil,
			[]string{"--margin 2s (default)", "less than --grace-period 2s", "terminationGracePeriodSeconds"}},
		{"max wait fills the budget", []string{"--max-wait", "28s"}, nil,
			[]string{"--max-wait 28s", "less than the stop budget 28s", "lower --max-wait"}},
		{"max wait beyond grace", []string{"--max-wait", "40s"}, nil,
			[]string{"--max-wait 40s", "stop budget 28s"}},
		{"max wait beyond grace from env", nil, map[string]string{"HAPSUPER_MAX_WAIT": "1m"},
			[]string{"HAPSUPER_MAX_WAIT=1m0s", "stop budget 28s"}},
		{"quiet not below explicit max wait", []string{"--max-wait", "5s", "--quiet-period", "5s"}, nil,
			[]string{"--quiet-period 5s", "less than --max-wait 5s", "lower --quiet-period or raise --max-wait"}},
		{"quiet not below derived max wait", []string{"--grace-period", "5s"}, nil,
			[]string{"--quiet-period 2s (default)", "--max-wait 2s (default: two thirds of --grace-period − --margin)"}},
		{"poll not below quiet", []string{"--poll-interval", "2s"}, nil,
			[]string{"--poll-interval 2s", "less than --quiet-period 2s (default)", "lower --poll-interval"}},
		{"withdrawn quiet above quiet", []string{"--withdrawn-quiet-period", "3s"}, nil,
			[]string{"--withdrawn-quiet-period 3s", "at most --quiet-period 2s (default)"}},
		{"withdrawn quiet zero from env", nil, map[string]string{"HAPSUPER_WITHDRAWN_QUIET_PERIOD": "0s"},
			[]string{"HAPSUPER_WITHDRAWN_QUIET_PERIOD=0s", "more than 0"}},
		{"poll not below withdrawn quiet", []string{"--withdrawn-quiet-period", "100ms"}, nil,
			[]string{"--poll-interval 100ms (default)", "less than --withdrawn-quiet-period 100ms"}},
		{"stop signal KILL", []string{"--stop-signals", "SIGTERM,kill"}, nil,
			[]string{"-stop-signals", "SIGKILL cannot be caught"}},
		{"stop signal STOP from env", nil, map[string]string{"HAPSUPER_STOP_SIGNALS": "19"},
			[]string{"HAPSUPER_STOP_SIGNALS", "SIGSTOP cannot be caught"}},
		{"stop signal CHLD", []string{"--stop-signals", "sigchld"}, nil,
			[]string{"SIGCHLD", "reaper"}},
		{"stop signal URG (Go's preemption)", []string{"--stop-signals", "SIGTERM,SIGURG"}, nil,
			[]string{"SIGURG is raised by the Go runtime"}},
		{"stop signal PIPE from env", nil, map[string]string{"HAPSUPER_STOP_SIGNALS": "PIPE"},
			[]string{"HAPSUPER_STOP_SIGNALS", "SIGPIPE is raised"}},
		{"stop signal unknown", []string{"--stop-signals", "SIGFOO"}, nil,
			[]string{`unknown signal "SIGFOO"`}},
		{"stop signals empty", []string{"--stop-signals", ","}, nil,
			[]string{"no signal given"}},
		{"log format", []string{"--log-format", "logfmt"}, nil,
			[]string{"-log-format", "use one of text, json"}},
		{"routing mode", nil, map[string]string{"HAPSUPER_ROUTING": "ipvs"},
			[]string{"HAPSUPER_ROUTING", "use one of auto, off, endpointslices, kube-proxy"}},
		{"HAProxy's -S on TCP", []string{"--", "haproxy", "-S", "ipv4@127.0.0.1:9999", "-f", "x.cfg"}, nil,
			[]string{"-S ipv4@127.0.0.1:9999", "unix socket"}},
		{"relative master socket", []string{"--master-socket", "run/master.sock"}, nil,
			[]string{"--master-socket run/master.sock", "absolute path"}},
		{"master socket with a comma", []string{"--master-socket", "/run/a,b.sock"}, nil,
			[]string{"--master-socket /run/a,b.sock", "comma", "without one"}},
		{"variable set but empty", nil, map[string]string{"HAPSUPER_GRACE_PERIOD": ""},
			[]string{"HAPSUPER_GRACE_PERIOD is set but empty", "unset it"}},
		{"empty status socket", []string{"--status-socket="}, nil,
			[]string{"--status-socket", "is empty"}},
		{"empty master socket from -S", []string{"--", "haproxy", "-S", "unix@"}, nil,
			[]string{"master-socket", "is empty"}},
		{"empty haproxy binary", []string{"--", ""}, nil,
			[]string{"empty binary name"}},
		{"healthz port", []string{"--kube-proxy-healthz-port", "70000"}, nil,
			[]string{"--kube-proxy-healthz-port 70000", "not a TCP port"}},
		{"min sync period", nil, map[string]string{"HAPSUPER_KUBE_PROXY_MIN_SYNC_PERIOD": "100ms"},
			[]string{"HAPSUPER_KUBE_PROXY_MIN_SYNC_PERIOD=100ms", "below 500ms"}},
		{"sync allowance too small", []string{"--kube-proxy-sync-allowance", "5ms"}, nil,
			[]string{"--kube-proxy-sync-allowance 5ms", "below 10ms", "sync_proxy_rules_duration_seconds"}},
		{"sync allowance beyond min sync period", nil, map[string]string{"HAPSUPER_KUBE_PROXY_SYNC_ALLOWANCE": "950ms"},
			[]string{"HAPSUPER_KUBE_PROXY_SYNC_ALLOWANCE=950ms", "100ms", "--kube-proxy-min-sync-period 1s (default)", "within one minSyncPeriod"}},
		{"lb check without threshold", []string{"--lb-check-bind", ":8404"}, nil,
			[]string{"--lb-check-threshold 0 (default)", "unhealthy threshold"}},
		{"lb check threshold alone", []string{"--lb-check-threshold", "2"}, nil,
			[]string{"--lb-check-threshold 2", "without --lb-check-bind"}},
		{"lb check bind not an address", []string{"--lb-check-bind", "8404", "--lb-check-threshold", "2"}, nil,
			[]string{"--lb-check-bind 8404", "[host]:port"}},
		{"lb check bind with a line of HAProxy configuration", nil,
			map[string]string{"HAPSUPER_LB_CHECK_BIND": "127.0.0.1:8404\nglobal\n    stats socket /tmp/admin.sock mode 666 level admin\n#:1", "HAPSUPER_LB_CHECK_THRESHOLD": "2"},
			[]string{`HAPSUPER_LB_CHECK_BIND="127.0.0.1:8404\nglobal\n`, `'\n'`, "[host]:port"}},
		{"lb check bind with a tab", []string{"--lb-check-bind", ":8404\tssl", "--lb-check-threshold", "2"}, nil,
			[]string{`--lb-check-bind ":8404\tssl"`, `'\t'`}},
		{"lb check bind with a name", []string{"--lb-check-bind", "localhost:8404", "--lb-check-threshold", "2"}, nil,
			[]string{"--lb-check-bind localhost:8404", `host "localhost" is not an IP address`}},
		{"negative health-check window", []string{"--lb-health-check-window", "-1s"}, nil,
			[]string{"--lb-health-check-window -1s", "negative"}},
		{"health-check window beyond the bound", []string{"--lb-health-check-window", "17s"}, nil,
			[]string{"--lb-health-check-window 17s", "--withdrawn-quiet-period 2s", "would end at the bound", "raise --max-wait"}},
		{"negative load balancer delay", []string{"--lb-deregistration-delay", "-1s"}, nil,
			[]string{"--lb-deregistration-delay -1s", "negative"}},
		{"load balancer delay beyond the bound", []string{"--lb-deregistration-delay", "17s"}, nil,
			[]string{"--lb-deregistration-delay 17s", "--quiet-period 2s (default)", "every drain would end at the bound", "raise --max-wait"}},
		{"log level", nil, map[string]string{"HAPSUPER_LOG_LEVEL": "trace"},
			[]string{"HAPSUPER_LOG_LEVEL", "debug, info, warn or error"}},
		{"--master-socket conflicts with -S", []string{"--master-socket", "/a.sock", "--", "haproxy", "-S", "/b.sock"}, nil,
			[]string{"--master-socket /a.sock conflicts with -S /b.sock", "drop one"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Parse(tt.args, env(tt.env))
			if err == nil {
				t.Fatalf("Parse(%q, %v) = %+v, want an error", tt.args, tt.env, s)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Parse(%q, %v) error %q does not contain %q", tt.args, tt.env, err, w)
				}
			}
		})
	}
}

func TestParseHelp(t *testing.T) {
	badEnv := env(map[string]string{"HAPSUPER_GRACE_PERIOD": "thirty"}) // help must still print
	for _, arg := range []string{"-h", "--help"} {
		for _, getenv := range []func(string) (string, bool){nil, badEnv} {
			if _, err := Parse([]string{arg}, getenv); !errors.Is(err, flag.ErrHelp) {
				t.Errorf("Parse(%q) error = %v, want flag.ErrHelp", arg, err)
			}
		}
	}
}

func TestSettingsString(t *testing.T) {
	s, err := Parse([]string{"--ignore-frontends", "stats,healthz", "--log-level", "warn"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := s.String()
	for _, want := range []string{
		"grace-period=30s", "margin=2s", "max-wait=18.666s", "quiet-period=2s", "poll-interval=100ms",
		"ignore-frontends=stats,healthz", "stop-signals=SIGTERM,SIGUSR1", "log-level=warn",
		"haproxy=haproxy -f /usr/local/etc/haproxy/haproxy.cfg",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("String() = %q, missing %q", got, want)
		}
	}
	var b strings.Builder
	slog.New(slog.NewTextHandler(&b, nil)).Info("settings", "settings", s)
	if !strings.Contains(b.String(), "settings.max-wait=18.666s") {
		t.Errorf("LogValue logged %q, want settings.max-wait=18.666s", b.String())
	}
}

func TestUnknownEnv(t *testing.T) {
	got := UnknownEnv([]string{"HAPSUPER_GRACE_PERIOD=30s", "HAPSUPER_GRACE_PERIODS=30s", "HAPSUPER_SOMETHING_ELSE_ENTIRELY=1", "PATH=/bin", "HAPSUPER_QUIET=2s"})
	want := []string{
		"environment variable HAPSUPER_GRACE_PERIODS sets nothing: hapsuper reads no such variable; did you mean HAPSUPER_GRACE_PERIOD?",
		"environment variable HAPSUPER_SOMETHING_ELSE_ENTIRELY sets nothing: hapsuper reads no such variable",
		"environment variable HAPSUPER_QUIET sets nothing: hapsuper reads no such variable; did you mean HAPSUPER_QUIET_PERIOD?",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("UnknownEnv =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
