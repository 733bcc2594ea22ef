package judge

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
)

// PathKey names a path: one Service, one address family.
type PathKey struct {
	Service string
	Family  discovery.AddressType
}

func (k PathKey) String() string { return k.Service + " (" + string(k.Family) + ")" }

// Path is a Service and family whose slices listed this pod at some time
// since the watch started.
type Path struct {
	PathVerdict
	// Since is the receipt time (our clock) of the change that made the
	// path withdrawn: the change kube-proxy must have programmed. Zero while
	// pending. Changes that leave the verdict withdrawn do not move it.
	Since time.Time
}

// Settings are what the verdict follows of the observer's configuration.
type Settings struct {
	// KubeProxy: every node's kube-proxy must confirm the API's verdict
	// (kube-proxy mode); otherwise the API's verdict stands alone.
	KubeProxy       bool
	Namespace, Node string // the pod's
	Rule            Rule
	// LoadBalancerDelay holds a verdict that would end the drain that long
	// after the withdrawal, for balancers that target pod IPs.
	LoadBalancerDelay time.Duration
	// LBHealthCheckWindow is the node-checking balancers' window when a
	// Service's annotations do not give it; zero: unknown.
	LBHealthCheckWindow time.Duration
	// PodChecked: the balancers that reach the pod without kube-proxy are
	// followed on the pod's own health check, not named unobserved.
	PodChecked bool
}

// Facts are everything the verdict reads, as the observer's watches and
// polls left them. The maps are the observer's own, read under its lock.
type Facts struct {
	Settings
	Synced   bool      // the slice and Service watches delivered their initial lists
	WatchErr string    // the last error of a watch that has not synced
	StopAt   time.Time // zero until the drain starts
	PodSeen  bool      // the pod watch delivered the pod
	PodPaths []string  // the pod's own paths kube-proxy does not carry
	HostIP   netip.Addr
	Paths    map[PathKey]*Path
	Services map[string]*corev1.Service
	// Unproxied: Service → why, for Services kube-proxy does not program
	// whose slices listed the pod.
	Unproxied map[string]string
	Nodes     map[string]*Node  // nil until the node list is read
	NodesErr  string            // why the node list could not be read
	LeftNodes map[string]string // node → why it left the set
	// LBNodeChecks are the load balancers' health checks of the pod's
	// node (its Services' healthCheckNodePorts), as answered.
	LBNodeChecks map[CheckKey]*CheckState
}

// Targets is, per family, the receipt time R of the change kube-proxy must
// hold: the latest withdrawal among the family's paths. kube-proxy programs
// its whole state at each sync, and the rule's premises hold for every
// change received by R: a sync proven to hold a change received at R holds
// the earlier ones too.
func Targets(paths map[PathKey]*Path) map[discovery.AddressType]time.Time {
	t := map[discovery.AddressType]time.Time{}
	for k, p := range paths {
		if p.Withdrawn && p.Since.After(t[k.Family]) {
			t[k.Family] = p.Since
		}
	}
	return t
}

// APIWithdrawn says whether the API verdict is withdrawn on every path.
func APIWithdrawn(paths map[PathKey]*Path) bool {
	if len(paths) == 0 {
		return false
	}
	for _, p := range paths {
		if !p.Withdrawn {
			return false
		}
	}
	return true
}

// Unobserved lists every path not observed, sorted: the pod's own, the
// load balancers of the Services that list it, and the Services kube-proxy
// does not program that listed it.
func Unobserved(f *Facts) []string {
	var out []string
	if !f.PodChecked {
		out = slices.Clone(f.PodPaths)
	}
	pod := len(out)
	seen := map[string]bool{}
	for k := range f.Paths {
		if seen[k.Service] {
			continue
		}
		seen[k.Service] = true
		if why := lbTargets(f.Services[k.Service]); why != "" && !f.PodChecked {
			out = append(out, f.Namespace+"/"+k.Service+": "+why)
		}
	}
	for svc, why := range f.Unproxied {
		out = append(out, f.Namespace+"/"+svc+": "+why)
	}
	slices.Sort(out[pod:])
	return out
}

// Verdict is the routing verdict at now, as conditions (conditions.go),
// not yet rendered.
func Judge(f *Facts, now time.Time) Verdict {
	if !f.Synced {
		return Verdict{NotSynced: true, WatchErr: f.WatchErr}
	}
	v := Verdict{Unobserved: Unobserved(f)}
	if !f.PodSeen {
		v.Unobserved = append([]string{"pod not read (hostNetwork, hostPorts and readiness gates unknown)"}, v.Unobserved...)
	}
	if len(f.Paths) == 0 {
		v.NoPaths = true
		v.Hold = hold(f.LoadBalancerDelay, f.StopAt, now)
		return v
	}
	keys := sortedKeys(f.Paths)
	var latest time.Time
	for _, k := range keys {
		p := f.Paths[k]
		name := f.Namespace + "/" + k.String()
		if !p.Withdrawn {
			v.API.Pending = append(v.API.Pending, name+": "+p.Why)
			continue
		}
		v.API.Withdrawn = append(v.API.Withdrawn, name)
		if p.Since.After(latest) {
			latest = p.Since
		}
	}
	if len(v.API.Pending) > 0 {
		return v
	}
	v.API.Ago = now.Sub(latest)
	if f.KubeProxy {
		kp := kubeProxy(f)
		v.KubeProxy = &kp
	}
	if b := nodeBalancers(f, now); b != nil {
		v.NodeBalancers = b
	}
	v.Hold = hold(f.LoadBalancerDelay, latest, now)
	return v
}

// kubeProxy is the kube-proxy condition once the API says withdrawn.
func kubeProxy(f *Facts) KubeProxy {
	kp := KubeProxy{Left: leftNodes(f.LeftNodes)}
	switch {
	case f.StopAt.IsZero():
		kp.Phase = KubeProxyNotAsked
		return kp
	case f.Nodes == nil && f.NodesErr != "":
		kp.Phase, kp.Err = KubeProxyListFailed, f.NodesErr
		return kp
	case f.Nodes == nil:
		kp.Phase = KubeProxyNotListed
		return kp
	case len(f.Nodes) == 0:
		kp.Phase = KubeProxyNoNodes
		return kp
	}
	targets := Targets(f.Paths)
	names := make([]string, 0, len(f.Nodes))
	for name := range f.Nodes {
		names = append(names, name)
	}
	slices.Sort(names)
	kp.Phase, kp.Total = KubeProxyJudged, len(names)
	for _, name := range names {
		switch v, why := f.Rule.Node(f.Nodes[name], targets); v {
		case NodePending:
			kp.Pending = append(kp.Pending, name+": "+why)
		case NodeUnverified:
			kp.Unverified = append(kp.Unverified, name+": "+why)
		case NodeConfirmed:
			if f.Rule.Witness(f.Nodes[name], targets) == WitnessMetrics {
				kp.ByMetrics = append(kp.ByMetrics, name)
			}
			by, dated := f.Rule.SyncedBy(f.Nodes[name], targets)
			kp.undated = kp.undated || !dated
			kp.SyncedBy = maxTime(kp.SyncedBy, by)
		}
	}
	if kp.undated {
		kp.SyncedBy = time.Time{}
	}
	return kp
}

// leftNodes names the nodes that left the set, sorted.
func leftNodes(left map[string]string) []string {
	names := make([]string, 0, len(left))
	for name := range left {
		names = append(names, name)
	}
	slices.Sort(names)
	items := make([]string, len(names))
	for i, name := range names {
		items[i] = name + " " + left[name]
	}
	return items
}

// nodeBalancers is the condition of the balancers that health-check the
// node, for every withdrawn path with one; nil when there is none. One
// check per Service, whatever the family.
func nodeBalancers(f *Facts, now time.Time) *NodeBalancers {
	var checks []ServiceCheck
	seen := map[string]bool{}
	for _, k := range sortedKeys(f.Paths) {
		p := f.Paths[k]
		if !p.Withdrawn || p.Balancer == nil || seen[k.Service] {
			continue
		}
		seen[k.Service] = true
		var ann map[string]string
		if svc := f.Services[k.Service]; svc != nil {
			ann = svc.Annotations
		}
		c := ServiceCheck{Service: f.Namespace + "/" + k.Service}
		c.Window, c.Source = HealthCheckWindow(ann, f.LBHealthCheckWindow)
		if !f.HostIP.IsValid() {
			c.Phase = CheckNoHostIP
			checks = append(checks, c)
			continue
		}
		ck := CheckKey{Addr: f.HostIP, Port: p.Balancer.Port}
		c.URL = ck.URL()
		st := f.LBNodeChecks[ck]
		switch {
		case st == nil:
			c.Phase = CheckNotAsked
		case st.FailingSince.IsZero():
			c.Phase, c.Answer = CheckNotFailing, st.Answer
		default:
			c.Answer, c.Failing = st.Answer, now.Sub(st.FailingSince)
			switch {
			case c.Window <= 0:
				c.Phase = CheckNoWindow
			case c.Failing < c.Window:
				c.Phase = CheckWithinWindow
			default:
				c.Phase = CheckWindowPassed
			}
		}
		checks = append(checks, c)
	}
	if len(checks) == 0 {
		return nil
	}
	return &NodeBalancers{Node: f.Node, Checks: checks}
}

// hold is the load balancer delay's condition: from is the withdrawal (or
// the stop request when no slice lists the pod).
func hold(delay time.Duration, from, now time.Time) *Hold {
	if delay <= 0 {
		return nil
	}
	if from.IsZero() {
		return &Hold{Delay: delay, NotStarted: true}
	}
	return &Hold{Delay: delay, Left: from.Add(delay).Sub(now)}
}

func sortedKeys(paths map[PathKey]*Path) []PathKey {
	keys := make([]PathKey, 0, len(paths))
	for k := range paths {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b PathKey) int { return strings.Compare(a.String(), b.String()) })
	return keys
}

// maxNamed bounds how many paths or nodes a detail names.
const maxNamed = 5

// named joins at most maxNamed items and counts the rest.
func named(items []string) string {
	if len(items) <= maxNamed {
		return strings.Join(items, "; ")
	}
	return fmt.Sprintf("%s; and %d more", strings.Join(items[:maxNamed], "; "), len(items)-maxNamed)
}

// ago formats d in seconds with one decimal.
func ago(d time.Duration) string { return fmt.Sprintf("%.1fs", d.Seconds()) }
