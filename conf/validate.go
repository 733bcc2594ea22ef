package conf

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/hapsuper/hapsuper/haproxy/cmdline"
)

// minPollInterval keeps polling from loading HAProxy's master CLI.
const minPollInterval = 10 * time.Millisecond

// minSyncAllowance is below any kube-proxy sync seen (15 ms for a small
// nftables cluster): less would confirm syncs that were still running.
const minSyncAllowance = 10 * time.Millisecond

// minBaselinePeriod bounds --kube-proxy-baseline-period from below: polls
// while serving are spread over tens of seconds, not a drain's pace.
const minBaselinePeriod = time.Second

// validate checks that the durations fit in the grace period: the drain
// (max wait) must leave time for the soft stop, and the quiet period must
// fit in the drain.
func validate(s Settings, src source) error {
	for _, p := range []struct{ name, v string }{
		{"master-socket", s.MasterSocket},
		{"status-socket", s.StatusSocket},
		{"override-file", s.OverrideFile},
	} {
		if p.v == "" {
			return fmt.Errorf("%s is empty: give a path, or leave it out for the default", src.label(p.name, `""`))
		}
	}
	if a := cmdline.Scan(s.HAProxy); a.S != "" {
		if addr, _, _ := strings.Cut(a.S, ","); !strings.HasPrefix(addr, "/") && !strings.HasPrefix(addr, "unix@/") {
			return fmt.Errorf("-S %s in HAProxy's command is not a unix socket path: hapsuper drives HAProxy over its admin master CLI and must not put it on the network; use -S /path/master.sock, or drop -S for --master-socket", a.S)
		}
	}
	if !filepath.IsAbs(s.MasterSocket) {
		return fmt.Errorf("%s must be an absolute path (the master CLI is a unix socket HAProxy creates): give one", src.label("master-socket", s.MasterSocket))
	}
	if strings.Contains(s.MasterSocket, ",") {
		return fmt.Errorf("%s holds a comma, which HAProxy's -S reads as the start of its options, so it would listen elsewhere: give a path without one", src.label("master-socket", s.MasterSocket))
	}
	if s.HAProxy[0] == "" {
		return fmt.Errorf("HAProxy's command after -- starts with an empty binary name: give the haproxy binary or its flags")
	}
	positive := []struct {
		name string
		d    time.Duration
	}{
		{"grace-period", s.GracePeriod},
		{"margin", s.Margin},
		{"quiet-period", s.QuietPeriod},
	}
	for _, p := range positive {
		if p.d <= 0 {
			return fmt.Errorf("%s must be more than 0", src.label(p.name, p.d))
		}
	}
	if s.PollInterval < minPollInterval {
		return fmt.Errorf("%s is below the minimum of %v: raise it", src.label("poll-interval", s.PollInterval), minPollInterval)
	}
	if s.Margin >= s.GracePeriod {
		return fmt.Errorf("%s must be less than %s: lower the margin or raise the grace period to the pod's terminationGracePeriodSeconds",
			src.label("margin", s.Margin), src.label("grace-period", s.GracePeriod))
	}
	if s.MaxWait <= 0 {
		return fmt.Errorf("%s must be more than 0", src.label("max-wait", s.MaxWait))
	}
	if s.MaxWait >= s.Budget() {
		return fmt.Errorf("%s must be less than the stop budget %v (--grace-period − --margin), which must also hold the soft stop: lower --max-wait or raise --grace-period",
			src.label("max-wait", s.MaxWait), s.Budget())
	}
	if s.QuietPeriod >= s.MaxWait {
		return fmt.Errorf("%s must be less than %s, or the drain can never end quiet: lower --quiet-period or raise --max-wait",
			src.label("quiet-period", s.QuietPeriod), src.label("max-wait", s.MaxWait))
	}
	if s.PollInterval >= s.QuietPeriod {
		return fmt.Errorf("%s must be less than %s, or quiet cannot be observed: lower --poll-interval",
			src.label("poll-interval", s.PollInterval), src.label("quiet-period", s.QuietPeriod))
	}
	if src.set("withdrawn-quiet-period") {
		if s.WithdrawnQuietPeriod <= 0 || s.WithdrawnQuietPeriod > s.QuietPeriod {
			return fmt.Errorf("%s must be more than 0 and at most %s: it can only shorten quiet once routing is withdrawn",
				src.label("withdrawn-quiet-period", s.WithdrawnQuietPeriod), src.label("quiet-period", s.QuietPeriod))
		}
		if s.PollInterval >= s.WithdrawnQuietPeriod {
			return fmt.Errorf("%s must be less than %s, or quiet cannot be observed: lower --poll-interval",
				src.label("poll-interval", s.PollInterval), src.label("withdrawn-quiet-period", s.WithdrawnQuietPeriod))
		}
	}
	if s.KubeProxyMetricsPort < 0 || s.KubeProxyMetricsPort > 65535 {
		return fmt.Errorf("%s is not a TCP port: use 1-65535 (kube-proxy's default is 10249), or 0 to read no metrics", src.label("kube-proxy-metrics-port", s.KubeProxyMetricsPort))
	}
	if s.KubeProxyHealthzPort < 1 || s.KubeProxyHealthzPort > 65535 {
		return fmt.Errorf("%s is not a TCP port: use 1-65535 (kube-proxy's default is %d)", src.label("kube-proxy-healthz-port", s.KubeProxyHealthzPort), DefaultKubeProxyHealthzPort)
	}
	if s.KubeProxyMinSyncPeriod < 500*time.Millisecond {
		return fmt.Errorf("%s is below 500ms: use the cluster's kube-proxy minSyncPeriod (default %v) or more", src.label("kube-proxy-min-sync-period", s.KubeProxyMinSyncPeriod), DefaultKubeProxyMinSyncPeriod)
	}
	if s.KubeProxySyncAllowance < minSyncAllowance {
		return fmt.Errorf("%s is below %v: use kube-proxy's p99 sync_proxy_rules_duration_seconds plus its lag behind the apiserver (default %v)",
			src.label("kube-proxy-sync-allowance", s.KubeProxySyncAllowance), minSyncAllowance, DefaultKubeProxySyncAllowance)
	}
	if s.KubeProxySyncAllowance+WatchLag > s.KubeProxyMinSyncPeriod {
		return fmt.Errorf("%s plus the %v hapsuper allows its watch to lag kube-proxy's exceeds %s: the confirmation rule needs both within one minSyncPeriod; lower the allowance, or raise kube-proxy's minSyncPeriod and --kube-proxy-min-sync-period together",
			src.label("kube-proxy-sync-allowance", s.KubeProxySyncAllowance), WatchLag, src.label("kube-proxy-min-sync-period", s.KubeProxyMinSyncPeriod))
	}
	if s.KubeProxyBaselinePeriod != 0 && s.KubeProxyBaselinePeriod < minBaselinePeriod {
		return fmt.Errorf("%s is below %v: give tens of seconds (default %v), or 0 for no polls while the pod serves",
			src.label("kube-proxy-baseline-period", s.KubeProxyBaselinePeriod), minBaselinePeriod, DefaultKubeProxyBaselinePeriod)
	}
	if s.LBDeregistrationDelay < 0 {
		return fmt.Errorf("%s is negative: give 0 (no hold) or the load balancer's deregistration delay", src.label("lb-deregistration-delay", s.LBDeregistrationDelay))
	}
	if s.LBDeregistrationDelay > 0 && s.LBDeregistrationDelay+s.QuietPeriod >= s.MaxWait {
		return fmt.Errorf("%s plus %s reaches %s: every drain would end at the bound; raise --max-wait (and --grace-period)",
			src.label("lb-deregistration-delay", s.LBDeregistrationDelay), src.label("quiet-period", s.QuietPeriod), src.label("max-wait", s.MaxWait))
	}
	if err := validateLBCheck(s, src); err != nil {
		return err
	}
	if s.HAProxyMemoryShare < 0 || s.HAProxyMemoryShare > 100 {
		return fmt.Errorf("%s is not a percentage: give 1-100 (gopherd's images give HAProxy 66), or 0 for no -m", src.label("haproxy-memory-share", s.HAProxyMemoryShare))
	}
	if s.CompanionMemoryShare < 0 || s.CompanionMemoryShare > 100 {
		return fmt.Errorf("%s is not a percentage: give 1-100 (gopherd's images give the controller 33), or 0 for no GOMEMLIMIT", src.label("companion-memory-share", s.CompanionMemoryShare))
	}
	for _, p := range s.CreateIfMissing {
		if !filepath.IsAbs(p) {
			return fmt.Errorf("%s names %q, not an absolute path: give the file as HAProxy's -f names it", src.label("create-if-missing", strings.Join(s.CreateIfMissing, ",")), p)
		}
	}
	if err := validateCompanion(s, src); err != nil {
		return err
	}
	if s.LBHealthCheckWindow < 0 {
		return fmt.Errorf("%s is negative: give the load balancer's health-check interval × unhealthy threshold + one interval, or 0 (unknown)", src.label("lb-health-check-window", s.LBHealthCheckWindow))
	}
	if wq := s.WithdrawnQuiet(s.Routing); s.LBHealthCheckWindow > 0 && s.LBHealthCheckWindow+wq >= s.MaxWait {
		return fmt.Errorf("%s plus %s reaches %s: every drain behind such a load balancer would end at the bound; raise --max-wait (and --grace-period)",
			src.label("lb-health-check-window", s.LBHealthCheckWindow), src.label("withdrawn-quiet-period", wq), src.label("max-wait", s.MaxWait))
	}
	return nil
}

// validateCompanion checks the companion's timings: a kill delay the
// drain's share can give up (it is taken from --max-wait) and a backoff
// that grows.
func validateCompanion(s Settings, src source) error {
	if s.Companion == "" {
		for _, name := range []string{"companion-kill-delay", "companion-restart-backoff", "companion-restart-backoff-max"} {
			if src.set(name) {
				return fmt.Errorf("--%s is set without --companion: give --companion (HAPSUPER_COMPANION) or drop it", name)
			}
		}
		return nil
	}
	if s.CompanionKillDelay <= 0 {
		return fmt.Errorf("%s must be more than 0 (gopherd's is %v)", src.label("companion-kill-delay", s.CompanionKillDelay), DefaultCompanionKillDelay)
	}
	if s.MaxWait-s.CompanionKillDelay <= s.QuietPeriod {
		return fmt.Errorf("%s leaves the drain %v of %s, not more than %s: the drain could never end quiet; lower the kill delay or raise --max-wait (and --grace-period)",
			src.label("companion-kill-delay", s.CompanionKillDelay), s.MaxWait-s.CompanionKillDelay, src.label("max-wait", s.MaxWait), src.label("quiet-period", s.QuietPeriod))
	}
	if s.CompanionBackoff < 10*time.Millisecond {
		return fmt.Errorf("%s is below 10ms: a companion that keeps exiting would be restarted in a busy loop; raise it", src.label("companion-restart-backoff", s.CompanionBackoff))
	}
	if s.CompanionBackoffMax < s.CompanionBackoff {
		return fmt.Errorf("%s is below %s: give a maximum at least the first delay", src.label("companion-restart-backoff-max", s.CompanionBackoffMax), src.label("companion-restart-backoff", s.CompanionBackoff))
	}
	return nil
}

// validateLBCheck checks --lb-check-bind and --lb-check-threshold: an
// address HAProxy can bind (LBCheckAddr) and a threshold a balancer can
// have.
func validateLBCheck(s Settings, src source) error {
	if s.LBCheckBind == "" {
		if s.LBCheckThreshold != 0 {
			return fmt.Errorf("%s without --lb-check-bind: give the address the load balancer checks, or drop the threshold", src.label("lb-check-threshold", s.LBCheckThreshold))
		}
		return nil
	}
	if _, err := LBCheckAddr(s.LBCheckBind); err != nil {
		return fmt.Errorf("%s is not an address to bind: %w", src.label("lb-check-bind", QuoteIfUnprintable(s.LBCheckBind)), err)
	}
	if s.LBCheckThreshold < 1 || s.LBCheckThreshold > 20 {
		return fmt.Errorf("%s: give the load balancer's unhealthy threshold (1 to 20; AWS target groups default to 2, GKE to 2) with --lb-check-bind", src.label("lb-check-threshold", s.LBCheckThreshold))
	}
	return nil
}

// LBCheckAddr returns the address of --lb-check-bind as the override file
// writes it after `bind`, or why it is not one. It accepts exactly
// [host]:port where host is empty or `*` (every address), an IPv4 address,
// or an IPv6 address in brackets, and port is 1-65535 in decimal: nothing
// else reaches HAProxy's configuration, so no value can add a line, a
// comment or a bind option to it. Names are refused: HAProxy would resolve
// one once at start, and a name that resolves elsewhere later, or not at
// all, fails the start.
func LBCheckAddr(bind string) (string, error) {
	const want = "give [host]:port with an IP address or no host, such as :8404, 10.0.0.5:8404 or [fd00::5]:8404"
	for _, r := range bind {
		if r < 0x21 || r > 0x7e {
			return "", fmt.Errorf("it holds %q, a space, control or non-ASCII character: %s", r, want)
		}
	}
	i := strings.LastIndexByte(bind, ':')
	if i < 0 {
		return "", fmt.Errorf("no :port: %s", want)
	}
	host, port := bind[:i], bind[i+1:]
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil || n == 0 {
		return "", fmt.Errorf("port %q is not 1-65535: %s", port, want)
	}
	if host == "" || host == "*" {
		return host + ":" + strconv.FormatUint(n, 10), nil
	}
	ap, err := netip.ParseAddrPort(bind)
	switch {
	case err != nil && strings.Trim(host, "0123456789.") != "" && !strings.ContainsAny(host, ":[]"):
		return "", fmt.Errorf("host %q is not an IP address (names are not resolved: HAProxy would do it once, at start): %s", host, want)
	case err != nil:
		return "", fmt.Errorf("%w: %s", err, want)
	case ap.Addr().Zone() != "":
		return "", fmt.Errorf("IPv6 zone %q: HAProxy takes no zone in an address (bind to the address alone): %s", ap.Addr().Zone(), want)
	}
	return ap.String(), nil
}

// QuoteIfUnprintable returns v as it is when it is plain printable text, or
// Go-quoted when it holds characters (a newline, a tab) that would garble
// the message that shows it.
func QuoteIfUnprintable(v string) string {
	if q := strconv.Quote(v); q[1:len(q)-1] != v {
		return q
	}
	return v
}
