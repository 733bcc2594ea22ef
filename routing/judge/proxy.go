package judge

// Proxy is the service proxy a node's healthz answer comes from, as far as
// the answer tells (docs/routing.md, "Other service proxies"). Calico's eBPF
// dataplane and Antrea's proxyAll serve kube-proxy's own healthz code: their
// answers cannot be told from kube-proxy's, and their per-family stamps are
// taken, as kube-proxy's are, after their datapath writes. Cilium's
// kube-proxy replacement and OVN-Kubernetes emulate the endpoint: their
// lastUpdated is the current time, or when OVN-Kubernetes last checked its
// own pod, and never a sync.
type Proxy int

// The proxies an answer can name. The zero value is what the answer does
// not tell.
const (
	ProxyUnknown Proxy = iota
	// ProxyKubeProxy: kube-proxy's healthz code with per-family status
	// (kube-proxy 1.33 or later, or a proxy that embeds that code).
	ProxyKubeProxy
	// ProxyKubeProxyOld: kube-proxy's healthz code without per-family
	// status (kube-proxy before 1.33, or a proxy that embeds older code).
	ProxyKubeProxyOld
	// ProxyEmulated: Go-quoted times with lastUpdated equal to
	// currentTime, or a 503: Cilium's kube-proxy replacement or
	// OVN-Kubernetes, which answer alike then.
	ProxyEmulated
	// ProxyOVN: Go-quoted times, a 200 and lastUpdated before currentTime:
	// OVN-Kubernetes' last check of its own pod (Cilium's healthy answer
	// always says now).
	ProxyOVN
)

// String names the proxy for the detail, the log and `hapsuper check`.
func (p Proxy) String() string {
	switch p {
	case ProxyKubeProxy:
		return "kube-proxy's healthz (kube-proxy, or Calico eBPF or Antrea proxyAll, which embed it)"
	case ProxyKubeProxyOld:
		return "kube-proxy's healthz without per-family status (kube-proxy before 1.33, or Calico eBPF or Antrea proxyAll built on older code)"
	case ProxyEmulated:
		return "Cilium's kube-proxy replacement or OVN-Kubernetes (kube-proxy healthz emulation)"
	case ProxyOVN:
		return "OVN-Kubernetes (kube-proxy healthz emulation)"
	}
	return "unknown"
}

// NoSync says the proxy's lastUpdated is never a sync time: its answer is
// no evidence that the node's rules hold a change.
func (p Proxy) NoSync() bool {
	return p == ProxyEmulated || p == ProxyOVN
}

// Why says what the proxy's answer proves, for a node it leaves unverified.
func (p Proxy) Why() string {
	switch p {
	case ProxyEmulated:
		return "its lastUpdated is the current time (Cilium) or its last check of its own pod (OVN-Kubernetes), never a rule sync"
	case ProxyOVN:
		return "its lastUpdated is its last check of its own pod, never a rule sync"
	case ProxyKubeProxyOld:
		return "no per-family status: its lastUpdated is not a sync time"
	}
	return ""
}
