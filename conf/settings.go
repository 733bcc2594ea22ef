package conf

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/hapsuper/hapsuper/haproxy/cmdline"
)

// DefaultHAProxy is HAProxy's command when none follows `--`: the official
// image's configuration path.
var DefaultHAProxy = []string{"haproxy", "-f", "/usr/local/etc/haproxy/haproxy.cfg"}

// Settings is everything `hapsuper run` needs, validated by Parse.
type Settings struct {
	GracePeriod time.Duration // the pod's terminationGracePeriodSeconds
	QuietPeriod time.Duration // no new traffic for this long ends the drain
	// WithdrawnQuietPeriod is --withdrawn-quiet-period, the quiet period
	// once routing is observed withdrawn, on new connections only; 0 when
	// not set: WithdrawnQuiet derives it from the routing mode.
	WithdrawnQuietPeriod time.Duration
	MaxWait              time.Duration // the drain's bound; less than GracePeriod − Margin
	Margin               time.Duration // safety margin before the kubelet's SIGKILL
	PollInterval         time.Duration // how often HAProxy's counters are read
	IgnoreFrontends      []string      // frontends whose traffic is not counted
	MasterSocket         string        // the -S address HAProxy listens on (the user's own -S reused)
	StatusSocket         string        // hapsuper's status socket
	OverrideFile         string        // the -f file hapsuper writes, passed last
	StopSignals          []syscall.Signal
	LogFormat            string // "text" or "json"
	LogLevel             slog.Level
	HAProxy              []string // the user's argv after "--" (or DefaultHAProxy), binary first
	Routing              string   // RoutingAuto, RoutingOff, RoutingEndpointSlices or RoutingKubeProxy
	Kubeconfig           string   // kubeconfig file for out-of-cluster use; empty: in-cluster credentials
	MetricsAddr          string   // Prometheus endpoint address; empty: off

	KubeProxyHealthzPort    int           // kube-proxy's healthz port on every node
	KubeProxyMetricsPort    int           // kube-proxy's metrics port on every node; 0: not read
	KubeProxyMinSyncPeriod  time.Duration // the cluster's kube-proxy minSyncPeriod (or more)
	KubeProxySyncAllowance  time.Duration // D: kube-proxy's lag behind hapsuper's watch plus one sync
	KubeProxyBaselinePeriod time.Duration // every node's kube-proxy asked once per period while serving; 0: off
	LBDeregistrationDelay   time.Duration // load balancers' sending after deregistration; 0: none
	LBHealthCheckWindow     time.Duration // a node-checking balancer's mark-down after its check fails; 0: unknown
	LBCheckBind             string        // address of the pod's health check for balancers that target the pod; empty: none
	LBCheckThreshold        int           // their unhealthy threshold

	HAProxyMemoryShare   int      // percent of the cgroup memory limit given to HAProxy as -m; 0: none
	CompanionMemoryShare int      // percent of the cgroup memory limit given to the companion as GOMEMLIMIT; 0: none
	CreateIfMissing      []string // files created empty before HAProxy starts when missing

	// The companion process (--companion), a controller started beside
	// HAProxy; Companion empty: none.
	Companion           string        // its program
	CompanionArgs       []string      // its arguments: the words after "--" when Companion is set
	CompanionKillDelay  time.Duration // SIGTERM to its group, SIGKILL this much later
	CompanionBackoff    time.Duration // the first restart's delay, doubled per quick exit
	CompanionBackoffMax time.Duration // the longest delay; running this long resets it
	HAProxyCommand      string        // --haproxy-command as given; empty: not given
}

// Defaults of the companion's timings, gopherd's kill delay among them.
const (
	DefaultCompanionKillDelay  = 4 * time.Second
	DefaultCompanionBackoff    = 500 * time.Millisecond
	DefaultCompanionBackoffMax = 30 * time.Second
)

// Defaults that other packages and messages name. Every other default is
// written once, in defaults.
const (
	// DefaultStatusSocket is --status-socket's default, where `hapsuper
	// status` looks when told nothing.
	DefaultStatusSocket = "/var/run/hapsuper/status.sock"
	// DefaultKubeProxyHealthzPort is kube-proxy's own healthz port
	// (healthzBindAddress 0.0.0.0:10256).
	DefaultKubeProxyHealthzPort = 10256
	// DefaultKubeProxyMinSyncPeriod is kube-proxy's own minSyncPeriod default.
	DefaultKubeProxyMinSyncPeriod = time.Second
	// DefaultCounterPollInterval is --poll-interval's default: how often
	// HAProxy's counters are read while starting and draining.
	DefaultCounterPollInterval = 100 * time.Millisecond
	// DefaultKubeProxySyncAllowance is --kube-proxy-sync-allowance's default.
	DefaultKubeProxySyncAllowance = 250 * time.Millisecond
	// DefaultKubeProxyBaselinePeriod is --kube-proxy-baseline-period's
	// default: every node asked once every 90 s while the pod serves
	// (what it costs: docs/benchmarks.md).
	DefaultKubeProxyBaselinePeriod = 90 * time.Second
)

// ServingPollInterval is how often the master CLI is read while HAProxy
// serves and no drain is under way (--poll-interval when that is longer):
// enough for health, status and metrics. Each reading costs the master a few
// CLI round trips (show proc, then each worker's counters); at
// --poll-interval for the pod's whole life it was 2-3 % of a core at idle.
// The baseline a drain needs is taken at the stop request, and quiet is
// proved by readings taken after it, at --poll-interval.
const ServingPollInterval = time.Second

// StatusSocketEnv is the variable that sets --status-socket; `hapsuper
// status` reads it for its --socket too.
var StatusSocketEnv = EnvName("status-socket")

// WatchLag is how much earlier than hapsuper's watch kube-proxy may receive
// a change, in the confirmation rule: the sync allowance and it must fit in
// the min sync period (validate). routing's Config takes it as its
// default.
const WatchLag = 100 * time.Millisecond

// The routing observation modes (--routing).
const (
	RoutingAuto           = "auto"           // with credentials: kube-proxy when its grants and healthz are there, else endpointslices; otherwise off
	RoutingOff            = "off"            // quiet period only
	RoutingEndpointSlices = "endpointslices" // withdrawal observed in the API
	RoutingKubeProxy      = "kube-proxy"     // and confirmed by every node's kube-proxy
)

var routingModes = []string{RoutingAuto, RoutingOff, RoutingEndpointSlices, RoutingKubeProxy}

// Budget is the time from a stop request to hapsuper's deadline: GracePeriod
// less Margin. Every soft stop is bounded by it (hard-stop-after).
func (s Settings) Budget() time.Duration { return s.GracePeriod - s.Margin }

// defaults returns the settings before flags and environment; MaxWait is
// derived later from the final grace period and margin.
func defaults() Settings {
	return Settings{
		GracePeriod:  30 * time.Second,
		QuietPeriod:  2 * time.Second,
		Margin:       2 * time.Second,
		PollInterval: DefaultCounterPollInterval,
		MasterSocket: "/var/run/hapsuper/master.sock",
		StatusSocket: DefaultStatusSocket,
		OverrideFile: "/var/run/hapsuper/override.cfg",
		StopSignals:  []syscall.Signal{syscall.SIGTERM, syscall.SIGUSR1},
		LogFormat:    "text",
		LogLevel:     slog.LevelInfo,
		Routing:      RoutingAuto,

		KubeProxyHealthzPort:    DefaultKubeProxyHealthzPort,
		KubeProxyMinSyncPeriod:  DefaultKubeProxyMinSyncPeriod,
		KubeProxySyncAllowance:  DefaultKubeProxySyncAllowance,
		KubeProxyBaselinePeriod: DefaultKubeProxyBaselinePeriod,

		CompanionKillDelay:  DefaultCompanionKillDelay,
		CompanionBackoff:    DefaultCompanionBackoff,
		CompanionBackoffMax: DefaultCompanionBackoffMax,
	}
}

// newFlagSet binds the run command's flags to s. Its usage strings are the
// flags' help and the README's flag table (RunFlags).
func newFlagSet(s *Settings) *flag.FlagSet {
	fs := flag.NewFlagSet("hapsuper run", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Var(durationValue{&s.GracePeriod}, "grace-period", "the pod's terminationGracePeriodSeconds; must match the pod spec")
	fs.Var(durationValue{&s.QuietPeriod}, "quiet-period", "no new request or connection for this long is quiet (the rule until routing is observed withdrawn)")
	fs.Var(durationValue{&s.WithdrawnQuietPeriod}, "withdrawn-quiet-period", "once routing is observed withdrawn: no new connection for this long is quiet (at most quiet-period)")
	fs.Var(durationValue{&s.MaxWait}, "max-wait", "longest drain before the soft stop; the soft stop keeps the rest of grace-period − margin")
	fs.Var(durationValue{&s.Margin}, "margin", "safety margin before the kubelet's SIGKILL; the deadline is stop request + grace-period − margin")
	fs.Var(durationValue{&s.PollInterval}, "poll-interval", "how often HAProxy's counters are read while starting and draining (at least 10ms); every "+ServingPollInterval.String()+" while serving")
	fs.Var(listValue{&s.IgnoreFrontends}, "ignore-frontends", "comma separated frontends whose traffic does not count (probes, stats)")
	fs.StringVar(&s.MasterSocket, "master-socket", s.MasterSocket, "HAProxy master CLI socket (-S); the HAProxy command's own -S wins")
	fs.StringVar(&s.StatusSocket, "status-socket", s.StatusSocket, "hapsuper's status socket")
	fs.StringVar(&s.OverrideFile, "override-file", s.OverrideFile, "configuration file hapsuper writes and passes to HAProxy as the last -f")
	fs.Var(signalsValue{&s.StopSignals}, "stop-signals", "comma separated signals that start the drain")
	fs.Var(choiceValue{&s.LogFormat, []string{"text", "json"}}, "log-format", "text or json")
	fs.Var(levelValue{&s.LogLevel}, "log-level", "debug, info, warn or error")
	fs.Var(choiceValue{&s.Routing, routingModes}, "routing", "routing observation: off, endpointslices, kube-proxy, or auto (with in-cluster credentials or a kubeconfig: kube-proxy when nodes can be listed and this node's kube-proxy healthz answers, else endpointslices; without: off)")
	fs.StringVar(&s.Kubeconfig, "kubeconfig", s.Kubeconfig, "kubeconfig for use outside a cluster (default: in-cluster credentials)")
	fs.IntVar(&s.KubeProxyHealthzPort, "kube-proxy-healthz-port", s.KubeProxyHealthzPort, "kube-proxy's healthz port on the nodes (--routing kube-proxy)")
	fs.IntVar(&s.KubeProxyMetricsPort, "kube-proxy-metrics-port", s.KubeProxyMetricsPort, "kube-proxy's metrics port on the nodes, where its --metrics-bind-address listens on the node address (10249): its metrics as a second witness of its syncs, counted only where they match its healthz (--routing kube-proxy); 0: off")
	fs.Var(durationValue{&s.KubeProxyMinSyncPeriod}, "kube-proxy-min-sync-period", "the cluster's kube-proxy minSyncPeriod, or more (--routing kube-proxy)")
	fs.Var(durationValue{&s.KubeProxySyncAllowance}, "kube-proxy-sync-allowance", "kube-proxy's lag behind hapsuper's watch plus one rule sync: its p99 sync_proxy_rules_duration_seconds, or more; where its metrics are read, raised per node to the longest sync they measured (--routing kube-proxy)")
	fs.Var(durationValue{&s.KubeProxyBaselinePeriod}, "kube-proxy-baseline-period", "while the pod serves, ask every node's kube-proxy healthz once per period (spread, at most 50 nodes a second), keeping one connection per node, so a drain starts with each node's process known (--routing kube-proxy); 0: off, the first poll comes at the stop")
	fs.Var(durationValue{&s.LBDeregistrationDelay}, "lb-deregistration-delay", "how long load balancers that target pod IPs keep sending after deregistration; the drain holds that long after the withdrawal (routing modes)")
	fs.Var(durationValue{&s.LBHealthCheckWindow}, "lb-health-check-window", "the longest a load balancer that health-checks the nodes (externalTrafficPolicy Local) takes to stop sending once its check fails: interval × unhealthy threshold + one interval; a Service's AWS or Azure health-check annotations take precedence; 0s: unknown, such drains run to the bound")
	fs.StringVar(&s.LBCheckBind, "lb-check-bind", s.LBCheckBind, "for load balancers that health-check the pod itself (IP targets, hostNetwork, hostPort): the address of a health check hapsuper adds to HAProxy, such as :8404, answering 200, and 503 from the stop on; the drain waits until every address that was checking it got --lb-check-threshold failed checks (default: none)")
	fs.IntVar(&s.LBCheckThreshold, "lb-check-threshold", s.LBCheckThreshold, "the unhealthy threshold of the load balancers that check --lb-check-bind: failed checks that mark the pod down")
	fs.StringVar(&s.MetricsAddr, "metrics-addr", s.MetricsAddr, "address of the Prometheus endpoint, such as :9101 (default: off)")
	fs.IntVar(&s.HAProxyMemoryShare, "haproxy-memory-share", s.HAProxyMemoryShare, "percent of the container's cgroup memory limit HAProxy may use: hapsuper adds -m (that share in megabytes) to HAProxy's command when it has none (0: off; no limit: nothing added)")
	fs.IntVar(&s.CompanionMemoryShare, "companion-memory-share", s.CompanionMemoryShare, "percent of the container's cgroup memory limit the companion may use: hapsuper sets its GOMEMLIMIT (MiB) when the environment has none (0: off; no limit: nothing set)")
	fs.Var(listValue{&s.CreateIfMissing}, "create-if-missing", "comma separated files hapsuper creates empty, mode 0664, before HAProxy starts when they do not exist (a second -f a controller fills later)")
	fs.StringVar(&s.Companion, "companion", s.Companion, "a program hapsuper starts beside HAProxy once it is ready (an ingress controller), in its own process group: the words after -- are its arguments, restarted with backoff when it exits 0 or by a signal, any other exit soft-stops HAProxy and hapsuper exits with its code; stopped right before the drain's soft stop (default: none)")
	fs.StringVar(&s.HAProxyCommand, "haproxy-command", s.HAProxyCommand, "HAProxy's command, binary first, words split on spaces (no quoting): with --companion, where HAProxy's command comes from (default: haproxy's default command); without, instead of the words after --")
	fs.Var(durationValue{&s.CompanionKillDelay}, "companion-kill-delay", "how long the companion and what it started have to exit after SIGTERM before SIGKILL to all of them; taken from the drain's share (--max-wait), so that the soft stop still comes by it")
	fs.Var(durationValue{&s.CompanionBackoff}, "companion-restart-backoff", "delay before restarting a companion that exited 0 or by a signal, doubled for each exit that follows a run shorter than --companion-restart-backoff-max")
	fs.Var(durationValue{&s.CompanionBackoffMax}, "companion-restart-backoff-max", "the longest restart delay; a run this long resets it to --companion-restart-backoff")
	return fs
}

// EnvName is the environment variable that sets the flag name:
// HAPSUPER_ and the name in upper snake case (grace-period → HAPSUPER_GRACE_PERIOD).
func EnvName(flagName string) string {
	return "HAPSUPER_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// Parse reads the run command's arguments (without the program name and the
// subcommand) and the HAPSUPER_* variables from lookupEnv (os.LookupEnv;
// nil means none); a flag wins over its variable, and a variable that is
// set but empty is an error (a broken template leaves one so). The arguments after a literal `--` are
// HAProxy's command, binary first. -h or --help returns flag.ErrHelp; a
// command line that cannot be read returns a *UsageError.
func Parse(args []string, lookupEnv func(string) (string, bool)) (Settings, error) {
	return ParseWith(args, lookupEnv, nil)
}

// ParseWith is Parse for a command that takes run's flags and its own:
// extra, when not nil, defines them on the flag set before parsing.
func ParseWith(args []string, lookupEnv func(string) (string, bool), extra func(*flag.FlagSet)) (Settings, error) {
	flagArgs, command, hasCommand := splitCommand(args)
	s := defaults()
	fs := newFlagSet(&s)
	if extra != nil {
		extra(fs)
	}
	fromEnv, envErr := applyEnv(fs, lookupEnv)
	if err := ParseFlags(fs, flagArgs); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return Settings{}, err // help, even with a bad variable
		}
		return Settings{}, fmt.Errorf("parse run flags: %w", err)
	}
	if envErr != nil {
		return Settings{}, envErr
	}
	if fs.NArg() > 0 {
		return Settings{}, fmt.Errorf("parse run flags: %w", &UsageError{fmt.Errorf("unexpected argument %q: put HAProxy's command after --", fs.Arg(0))})
	}
	onCommandLine := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { onCommandLine[f.Name] = true })
	src := source{cli: onCommandLine, env: fromEnv}

	s.HAProxy = slices.Clone(DefaultHAProxy)
	if s.Companion != "" && hasCommand {
		// The charts pass the controller's flags as the container's args,
		// after an ENTRYPOINT that ends in --.
		s.CompanionArgs, command, hasCommand = slices.Clone(command), nil, false
	}
	if src.set("haproxy-command") {
		if hasCommand {
			return Settings{}, fmt.Errorf("parse run arguments: %s and HAProxy's command after -- both give HAProxy's command: drop one (with --companion, the words after -- are the companion's)", src.label("haproxy-command", s.HAProxyCommand))
		}
		command, hasCommand = strings.Fields(s.HAProxyCommand), true
		if len(command) == 0 {
			return Settings{}, fmt.Errorf("%s has no words: give HAProxy's command, binary first, or leave it out", src.label("haproxy-command", `""`))
		}
	}
	if hasCommand {
		if len(command) == 0 {
			return Settings{}, fmt.Errorf("parse run arguments: nothing after --: give HAProxy's command, binary first, or drop the --")
		}
		s.HAProxy = slices.Clone(command)
		if strings.HasPrefix(command[0], "-") {
			// `docker run IMAGE -f x.cfg`: HAProxy's flags without the
			// binary, which the official image's entrypoint also accepts.
			s.HAProxy = append([]string{"haproxy"}, command...)
		}
	}
	if sock, ok := cmdline.Scan(s.HAProxy).MasterSocket(); ok {
		if src.set("master-socket") && s.MasterSocket != sock {
			return Settings{}, fmt.Errorf("%s conflicts with -S %s in HAProxy's command: drop one of them", src.label("master-socket", s.MasterSocket), sock)
		}
		s.MasterSocket = sock
	}
	if !src.set("max-wait") {
		s.MaxWait = derivedMaxWait(s.GracePeriod, s.Margin)
	}
	if err := validate(s, src); err != nil {
		return Settings{}, err
	}
	return s, nil
}

// splitCommand splits args at the first literal "--".
func splitCommand(args []string) (flags, command []string, hasCommand bool) {
	i := slices.Index(args, "--")
	if i < 0 {
		return args, nil, false
	}
	return args[:i], args[i+1:], true
}

// applyEnv sets every flag whose variable is set and returns which ones.
func applyEnv(fs *flag.FlagSet, lookupEnv func(string) (string, bool)) (map[string]bool, error) {
	fromEnv := map[string]bool{}
	if lookupEnv == nil {
		return fromEnv, nil
	}
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		name := EnvName(f.Name)
		v, set := lookupEnv(name)
		if err != nil || !set {
			return
		}
		if v == "" {
			err = &UsageError{fmt.Errorf("environment variable %s is set but empty: unset it for the default of --%s, or give it a value", name, f.Name)}
			return
		}
		if e := f.Value.Set(v); e != nil {
			err = fmt.Errorf("read environment variable %s=%q: %w", name, v, e)
			return
		}
		fromEnv[f.Name] = true
	})
	return fromEnv, err
}

// derivedMaxWait is two thirds of the stop budget, so the soft stop keeps a
// third of it; rounded down to the millisecond.
func derivedMaxWait(grace, margin time.Duration) time.Duration {
	return ((grace - margin) / 3 * 2).Truncate(time.Millisecond) // divide first: no overflow
}

// source says where a setting came from, for error messages.
type source struct{ cli, env map[string]bool }

func (src source) set(name string) bool { return src.cli[name] || src.env[name] }

// label names a setting as the user gave it: "--max-wait 40s",
// "HAPSUPER_MAX_WAIT=40s", or "--max-wait 18.666s (default)".
func (src source) label(name string, v any) string {
	switch {
	case src.cli[name]:
		return fmt.Sprintf("--%s %v", name, v)
	case src.env[name]:
		return fmt.Sprintf("%s=%v", EnvName(name), v)
	case name == "max-wait":
		return fmt.Sprintf("--max-wait %v (default: two thirds of --grace-period − --margin)", v)
	case name == "withdrawn-quiet-period":
		return fmt.Sprintf("--withdrawn-quiet-period %v (default: %v with routing kube-proxy, else --quiet-period)", v, WithdrawnQuietFloor)
	}
	return fmt.Sprintf("--%s %v (default)", name, v)
}

// String is the settings on one line, flag names as keys.
func (s Settings) String() string {
	var b strings.Builder
	for i, a := range s.attrs() {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s=%v", a.Key, a.Value)
	}
	return b.String()
}

// LogValue logs the settings as a group keyed by flag names.
func (s Settings) LogValue() slog.Value { return slog.GroupValue(s.attrs()...) }

// attrs is every run flag's value, read through the flag set itself (so a
// flag added there is logged too), in the flag set's order, then the
// HAProxy command.
func (s Settings) attrs() []slog.Attr {
	var attrs []slog.Attr
	newFlagSet(&s).VisitAll(func(f *flag.Flag) {
		if g, ok := f.Value.(flag.Getter); ok {
			if n, ok := g.Get().(int); ok {
				attrs = append(attrs, slog.Int(f.Name, n))
				return
			}
		}
		v := f.Value.String()
		if f.Name == "withdrawn-quiet-period" {
			v = s.WithdrawnQuietText() // unset: the rule, not 0s
		}
		attrs = append(attrs, slog.String(f.Name, v))
	})
	attrs = append(attrs, slog.String("haproxy", strings.Join(s.HAProxy, " ")))
	if s.Companion != "" {
		attrs = append(attrs, slog.String("companion-args", strings.Join(s.CompanionArgs, " ")))
	}
	return attrs
}

// UnknownEnv returns a warning for every HAPSUPER_* variable of environ
// (os.Environ) that sets no run flag: a misspelt name is otherwise ignored
// without a word. The warning names the closest variable hapsuper reads.
func UnknownEnv(environ []string) []string {
	s := defaults()
	fs := newFlagSet(&s)
	known := map[string]bool{}
	var names []string
	fs.VisitAll(func(f *flag.Flag) { known[EnvName(f.Name)] = true; names = append(names, EnvName(f.Name)) })
	var out []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, "HAPSUPER_") || known[name] {
			continue
		}
		w := fmt.Sprintf("environment variable %s sets nothing: hapsuper reads no such variable", name)
		if near := Closest(name, names); near != "" {
			w += "; did you mean " + near + "?"
		}
		out = append(out, w)
	}
	return out
}

// WithdrawnQuietFloor is the default quiet period once routing is observed
// withdrawn in kube-proxy mode: the in-flight window's default (450ms)
// rounded up.
const WithdrawnQuietFloor = 500 * time.Millisecond

// WithdrawnQuiet is the quiet period, on new connections, once routing is
// observed withdrawn in the routing mode the drain runs in (auto resolved):
// --withdrawn-quiet-period when set. Otherwise, in kube-proxy mode, where
// every node's rules are confirmed before the verdict, only the connections
// already on their way then remain: the in-flight window, at least
// WithdrawnQuietFloor and at most the quiet period; the self-audit turns a
// later one into an unverified drain (drain/audit.go). In every other mode
// the verdict comes before the nodes' rules are seen to change, so the
// quiet period covers their lag.
func (s Settings) WithdrawnQuiet(mode string) time.Duration {
	switch {
	case s.WithdrawnQuietPeriod > 0:
		return s.WithdrawnQuietPeriod
	case mode != RoutingKubeProxy:
		return s.QuietPeriod
	}
	return min(max(WithdrawnQuietFloor, s.InFlightWindow()), s.QuietPeriod)
}

// WithdrawnQuietText is the withdrawn quiet period as the start line and
// `hapsuper check` say it, before auto has picked a mode.
func (s Settings) WithdrawnQuietText() string {
	kp, other := s.WithdrawnQuiet(RoutingKubeProxy), s.WithdrawnQuiet(RoutingOff)
	if s.Routing != RoutingAuto || kp == other {
		return s.WithdrawnQuiet(s.Routing).String()
	}
	return fmt.Sprintf("%v with routing kube-proxy, else %v", kp, other)
}

// InFlightWindow is how long after a withdrawn verdict new connections are
// still expected (drain.Settings.InFlightWindow): a connection accepted
// just before the verdict is counted by a reading that ends up to a poll
// interval later, and a poll takes up to another; kube-proxy's sync
// allowance covers the connections its old rules sent while its sync ran.
func (s Settings) InFlightWindow() time.Duration {
	return s.KubeProxySyncAllowance + s.InFlightAllowance()
}

// InFlightAllowance is how long after the evidence of kube-proxy's
// confirmation (the latest completion of the last node's confirming sync)
// a new connection is still explained by it (drain.Settings.InFlightAllowance):
// its SYN was on the wire when the rules dropped the pod, and a connection
// accepted then is counted by a reading that ends up to a poll interval
// later, a poll taking up to another. The evidence dates the sync, so the
// in-flight window's sync allowance is not needed.
func (s Settings) InFlightAllowance() time.Duration {
	return 2 * s.PollInterval
}
