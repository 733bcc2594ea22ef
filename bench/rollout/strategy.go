package main

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hapsuper/hapsuper/conf"
)

// stratKind is how a pod's stop is played.
type stratKind int

const (
	// stratImmediate: plain HAProxy (haproxy -W), SIGUSR1 to its master at the
	// stop, as the official image (STOPSIGNAL SIGUSR1) without a drain does.
	stratImmediate stratKind = iota
	// stratSleep: plain HAProxy, a preStop sleep (KEP-3960) then SIGUSR1.
	stratSleep
	// stratQuiet: hapsuper --routing off: the quiet period alone.
	stratQuiet
	// stratHapsuper: hapsuper --routing kube-proxy, then quiet.
	stratHapsuper
)

// quietPeriod is hapsuper's quiet period in both hapsuper strategies.
const quietPeriod = 2 * time.Second

// strategy is one way to stop a pod during a rollout.
type strategy struct {
	name  string
	kind  stratKind
	sleep time.Duration // stratSleep's preStop
	// routing overrides the hapsuper strategies' --routing (the scale check
	// runs endpointslices).
	routing string
	// args are extra hapsuper flags.
	args []string
	// withdrawnQuiet is hapsuper's --withdrawn-quiet-period (0: its
	// default, conf.Settings.WithdrawnQuiet).
	withdrawnQuiet time.Duration
}

// The strategies of the matrix.
func immediate() strategy { return strategy{name: "immediate", kind: stratImmediate} }
func quiet() strategy     { return strategy{name: "quiet", kind: stratQuiet} }
func hapsuperS() strategy { return strategy{name: "hapsuper", kind: stratHapsuper} }

// hapsuperWQ is hapsuper with --withdrawn-quiet-period d.
func hapsuperWQ(d time.Duration) strategy {
	return strategy{name: fmt.Sprintf("hapsuper-wq%s", d), kind: stratHapsuper,
		args: []string{"--withdrawn-quiet-period", d.String()}, withdrawnQuiet: d}
}

// quietOnceWithdrawn is the quiet period the strategy applies once routing
// is withdrawn.
func (s strategy) quietOnceWithdrawn() time.Duration {
	if s.withdrawnQuiet > 0 {
		return s.withdrawnQuiet
	}
	set := conf.Settings{QuietPeriod: quietPeriod, PollInterval: conf.DefaultCounterPollInterval, KubeProxySyncAllowance: conf.DefaultKubeProxySyncAllowance}
	return set.WithdrawnQuiet(s.routingMode())
}

// routingMode is the --routing hapsuper runs with under the strategy.
func (s strategy) routingMode() string {
	switch {
	case s.routing != "":
		return s.routing
	case s.kind == stratHapsuper:
		return conf.RoutingKubeProxy
	}
	return conf.RoutingOff
}

func sleepFor(d time.Duration) strategy {
	return strategy{name: fmt.Sprintf("sleep-%s", d), kind: stratSleep, sleep: d}
}

// parseStrategy reads a strategy's name.
func parseStrategy(name string) (strategy, error) {
	for _, s := range []strategy{immediate(), quiet(), hapsuperS()} {
		if s.name == name {
			return s, nil
		}
	}
	if v, ok := strings.CutPrefix(name, "hapsuper-wq"); ok {
		if d, err := time.ParseDuration(v); err == nil && d > 0 && d <= quietPeriod {
			return hapsuperWQ(d), nil
		}
	}
	if v, ok := strings.CutPrefix(name, "sleep-"); ok {
		if d, err := time.ParseDuration(v); err == nil && d > 0 {
			return sleepFor(d), nil
		}
	}
	return strategy{}, fmt.Errorf("unknown strategy %q: use immediate, sleep-<duration> (sleep-5s), quiet, hapsuper or hapsuper-wq<duration> (hapsuper-wq500ms, at most the quiet period 2s)", name)
}

func (s strategy) underHapsuper() bool { return s.kind == stratQuiet || s.kind == stratHapsuper }

// sameProcess says whether pods of a and b run the same container, so
// that a pod started for one can be stopped as the other.
func sameProcess(a, b strategy) bool {
	return (a.kind == b.kind && slices.Equal(a.args, b.args)) || (!a.underHapsuper() && !b.underHapsuper())
}

// short is the strategy's name as a pod name prefix.
func (s strategy) short() string {
	switch s.kind {
	case stratImmediate:
		return "imm"
	case stratSleep:
		return fmt.Sprintf("sl%d", s.sleep/time.Second)
	case stratQuiet:
		return "qt"
	}
	if s.withdrawnQuiet > 0 {
		return "hw"
	}
	return "hs"
}

// cell is one rollout: a strategy, a client pattern, and whether the other
// node's kube-proxy is frozen for a while at each delete.
type cell struct {
	strat  strategy
	pat    pattern
	frozen bool
	lb     bool    // behind the balancer (balancer.go)
	faults []fault // played from the first delete on (campaign.go)
}

func (c cell) String() string {
	return fmt.Sprintf("%s / %s / %s", c.strat.name, c.pat, c.proxy())
}

func (c cell) proxy() string {
	if c.lb {
		return "live, behind the balancer"
	}
	if c.frozen {
		return "other frozen 4s"
	}
	return "live"
}
