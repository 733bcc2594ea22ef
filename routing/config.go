package routing

import (
	"fmt"
	"time"

	"github.com/hapsuper/hapsuper/conf"
)

// Mode is how much of the routing the observer watches.
type Mode string

// The modes.
const (
	// ModeOff observes nothing: the quiet period alone ends a drain.
	ModeOff Mode = "off"
	// ModeEndpointSlices watches EndpointSlices and Services: withdrawn means
	// withdrawn in the API. Needs a namespace Role: list/watch endpointslices
	// and services, get/watch pods (the own pod only is read).
	ModeEndpointSlices Mode = "endpointslices"
	// ModeKubeProxy adds the confirmation by every node's kube-proxy healthz.
	// Needs a ClusterRole with list on nodes and egress to the nodes' healthz
	// port.
	ModeKubeProxy Mode = "kube-proxy"
)

// Defaults of Config; a zero field takes its default.
const (
	DefaultHealthzPort    = conf.DefaultKubeProxyHealthzPort
	DefaultMinSyncPeriod  = conf.DefaultKubeProxyMinSyncPeriod
	DefaultSyncAllowance  = conf.DefaultKubeProxySyncAllowance
	DefaultWatchLag       = conf.WatchLag
	DefaultConcurrency    = 32
	DefaultRequestTimeout = time.Second
	// DefaultMetricsTimeout bounds a metrics request: kube-proxy renders
	// its /metrics in milliseconds, and a port that does not answer must
	// not hold the witness's slots for a healthz timeout.
	DefaultMetricsTimeout      = 200 * time.Millisecond
	DefaultHealthzPollInterval = 500 * time.Millisecond
	// FastPollInterval is the MinPollInterval hapsuper runs with.
	FastPollInterval = 200 * time.Millisecond
	// DefaultBaselinePeriod is --kube-proxy-baseline-period's default.
	DefaultBaselinePeriod = conf.DefaultKubeProxyBaselinePeriod
)

// Config is the observer's settings. The three durations of the confirmation
// rule (MinSyncPeriod, SyncAllowance, WatchLag) are judge.Rule's, explained
// in routing/judge's package comment; docs/routing.md gives the
// measurements behind their defaults.
type Config struct {
	Mode     Mode
	Identity Identity

	// HealthzPort is kube-proxy's healthz port on every node.
	HealthzPort int
	// MetricsPort is kube-proxy's metrics port on every node, read beside
	// healthz as a second witness (judge.Metrics); 0: not read.
	MetricsPort int

	// MinSyncPeriod is kube-proxy's --min-sync-period (iptables/nftables
	// minSyncPeriod), which cannot be observed: it must be at least the
	// cluster's value, or an ambiguous sync may be confirmed before the sync
	// that carries the change. Default 1s, kube-proxy's default.
	MinSyncPeriod time.Duration

	// SyncAllowance (D) bounds how late kube-proxy may receive a change after
	// us plus how long one of its syncs takes. A sync that completed at least
	// this long after we received the change started after kube-proxy had
	// it. Measured: handler skew -3…+2 ms, nftables syncs 15–40 ms (small
	// cluster, 2 cores). Default 250 ms (--kube-proxy-sync-allowance); raise
	// it to kube-proxy's p99 kubeproxy_sync_proxy_rules_duration_seconds plus
	// the apiserver watch lag where syncs are slower (iptables mode with
	// thousands of Services). A larger value only delays confirmation.
	SyncAllowance time.Duration

	// WatchLag is how much earlier than us kube-proxy may receive a change. A
	// sync that completed up to this long before we received the change is
	// ambiguous (resolved by waiting) rather than "no sync since the change".
	// Measured: a starved informer lagged kube-proxy by 3.5–60 ms. Default
	// 100 ms. A negative value turns the lagging-watcher fallback off (such
	// drains run to the bound). WatchLag + SyncAllowance must not exceed
	// MinSyncPeriod.
	WatchLag time.Duration

	// LoadBalancerDelay is how long a load balancer that targets pod IPs
	// keeps sending new connections after the pod is deregistered, as the
	// operator knows it (AWS target group deregistration, GCP health
	// checks): the verdict stays pending that long after the withdrawal
	// (after the stop request when no slice lists the pod). Zero: no hold.
	LoadBalancerDelay time.Duration

	// LBHealthCheckWindow is the longest a load balancer that health-checks
	// the nodes (externalTrafficPolicy Local) takes to stop sending once its
	// check of the node fails; a Service's own health-check annotations
	// take precedence (balancer.go). Zero: unknown, and such a path stays
	// pending.
	LBHealthCheckWindow time.Duration

	// PodChecked says the load balancers that reach the pod without
	// kube-proxy (hostNetwork, hostPort, readiness gates and annotations of
	// IP targets) health-check it on hapsuper's own check (--lb-check-bind),
	// whose failed checks the supervisor follows: those paths are observed
	// there, not named unobserved here.
	PodChecked bool

	// Concurrency bounds the requests in flight of each round: the
	// kube-proxies' healthz, and beside them the balancers' health checks.
	Concurrency int
	// RequestTimeout bounds one healthz request, connection included.
	RequestTimeout time.Duration
	// MetricsTimeout bounds one metrics request, connection included. A
	// node whose metrics port refuses or does not answer within it is not
	// asked for its metrics again in the drain: healthz alone judges it.
	MetricsTimeout time.Duration
	// PollInterval is the longest pause between two polls of one node.
	PollInterval time.Duration
	// MinPollInterval is the shortest: where nodes are few, each is asked
	// this often instead, at most pollRate nodes a second in all
	// (schedule.go's pollEvery). Zero: every PollInterval.
	MinPollInterval time.Duration

	// BaselinePeriod is how often, while the pod serves, every node's
	// kube-proxy is asked once, the polls spread over the period and
	// jittered, no more than baselineRate nodes a second (baseline.go):
	// a drain then starts with each node's process known and its
	// connection open. Zero: no baseline while serving, only from the
	// stop request or the pod's deletion on.
	BaselinePeriod time.Duration
}

// withDefaults fills the zero fields.
func (c Config) withDefaults() Config {
	if c.Mode == "" {
		c.Mode = ModeOff
	}
	if c.HealthzPort == 0 {
		c.HealthzPort = DefaultHealthzPort
	}
	if c.MinSyncPeriod == 0 {
		c.MinSyncPeriod = DefaultMinSyncPeriod
	}
	if c.SyncAllowance == 0 {
		c.SyncAllowance = DefaultSyncAllowance
	}
	if c.WatchLag == 0 {
		c.WatchLag = DefaultWatchLag
	}
	if c.Concurrency == 0 {
		c.Concurrency = DefaultConcurrency
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	if c.MetricsTimeout == 0 {
		c.MetricsTimeout = DefaultMetricsTimeout
	}
	if c.PollInterval == 0 {
		c.PollInterval = DefaultHealthzPollInterval
	}
	return c
}

// validate checks a Config that went through withDefaults.
func (c Config) validate() error {
	switch c.Mode {
	case ModeOff:
		return nil
	case ModeEndpointSlices, ModeKubeProxy:
	default:
		return fmt.Errorf("check routing config: unknown mode %q: use off, endpointslices or kube-proxy", c.Mode)
	}
	if err := c.Identity.validate(); err != nil {
		return err
	}
	switch {
	case c.HealthzPort < 1 || c.HealthzPort > 65535:
		return fmt.Errorf("check routing config: healthz port %d out of range", c.HealthzPort)
	case c.MetricsPort < 0 || c.MetricsPort > 65535:
		return fmt.Errorf("check routing config: metrics port %d out of range: use 1-65535, or 0 for none", c.MetricsPort)
	case c.MinSyncPeriod < 0, c.SyncAllowance < 0, c.RequestTimeout < 0, c.MetricsTimeout < 0, c.PollInterval < 0, c.MinPollInterval < 0, c.LoadBalancerDelay < 0, c.LBHealthCheckWindow < 0, c.BaselinePeriod < 0:
		return fmt.Errorf("check routing config: negative duration: only the watch lag may be negative")
	case c.Concurrency < 1:
		return fmt.Errorf("check routing config: concurrency %d: must be at least 1", c.Concurrency)
	case c.lag()+c.SyncAllowance > c.MinSyncPeriod:
		return fmt.Errorf("check routing config: watch lag %v + sync allowance %v exceed min sync period %v: the ambiguous-sync rule needs them within it",
			c.lag(), c.SyncAllowance, c.MinSyncPeriod)
	}
	return nil
}

// lag is the effective WatchLag: a negative setting means none.
func (c Config) lag() time.Duration { return max(c.WatchLag, 0) }
