package k8stest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// HealthzPort is where kube-proxy serves healthz, on the node's address.
const HealthzPort = 10256

// MetricsPort is where kube-proxy serves its metrics: on the node's
// address with Options.KubeProxyMetrics, else on the node's loopback.
const MetricsPort = 10249

// KubeProxy is one node's kube-proxy, running inside the node's network
// namespace with its own config file and the system:kube-proxy identity.
type KubeProxy struct {
	node *Node
	argv []string
	log  string

	mu   sync.Mutex
	proc *Process
}

func newKubeProxy(n *Node) (*KubeProxy, error) {
	h := n.h
	kubeconfig := h.path("kube-proxy-" + n.Name + ".kubeconfig")
	if err := writeKubeconfig(kubeconfig, h.apiserverURL(), h.pki.CA, h.pki.ProxyCert, h.pki.ProxyKey); err != nil {
		return nil, err
	}
	config := h.path("kube-proxy-" + n.Name + ".yaml")
	minSync := h.Options.MinSyncPeriod.String()
	metrics := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), MetricsPort)
	if h.Options.KubeProxyMetrics {
		metrics = netip.AddrPortFrom(n.IP, MetricsPort)
	}
	body := fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: %s
hostnameOverride: %s
mode: %s
clusterCIDR: %s
healthzBindAddress: %s
metricsBindAddress: %s
oomScoreAdj: 0
conntrack:
  maxPerCore: 0
iptables:
  minSyncPeriod: %s
nftables:
  minSyncPeriod: %s
`, kubeconfig, n.Name, h.Options.ProxyMode, clusterCIDR, netip.AddrPortFrom(n.IP, HealthzPort), metrics, minSync, minSync)
	if err := os.WriteFile(config, []byte(body), 0o600); err != nil {
		return nil, fmt.Errorf("write kube-proxy config for %s: %w", n.Name, err)
	}
	return &KubeProxy{
		node: n,
		argv: []string{"ip", "netns", "exec", n.NetNS, filepath.Join(h.bin, "kube-proxy"), "--config=" + config, "--v=2"},
		log:  h.path("kube-proxy-" + n.Name + ".log"),
	}, nil
}

// Start starts kube-proxy; after Stop it starts a new one (appending to the
// same log). It does not wait for it to be healthy. env, if any, is added
// to its environment (PATH=<dir>:… to put a wrapper before a tool).
func (k *KubeProxy) Start(env ...string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.proc != nil && k.proc.Err() == nil {
		return fmt.Errorf("start kube-proxy on %s: already running", k.node.Name)
	}
	p, err := startProcess("kube-proxy "+k.node.Name, k.log, k.argv, env...)
	if err != nil {
		return err
	}
	k.proc = p
	return nil
}

// Log is the file kube-proxy writes its log to (--v=2: each rule sync's
// "SyncProxyRules complete" with its elapsed time), across restarts.
func (k *KubeProxy) Log() string { return k.log }

// Process returns the running (or last) kube-proxy process, nil before Start.
func (k *KubeProxy) Process() *Process {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.proc
}

// Stop ends kube-proxy (SIGTERM, SIGKILL after 5s). Its rules stay in place,
// as when a real kube-proxy dies.
func (k *KubeProxy) Stop() error {
	if p := k.Process(); p != nil {
		return p.Stop(5 * time.Second)
	}
	return nil
}

// Freeze stops kube-proxy with SIGSTOP: healthz accepts connections but
// does not answer, and the rules go stale.
func (k *KubeProxy) Freeze() error {
	if p := k.Process(); p != nil {
		return p.Freeze()
	}
	return errors.New("freeze kube-proxy: not started")
}

// Thaw resumes a frozen kube-proxy.
func (k *KubeProxy) Thaw() error {
	if p := k.Process(); p != nil {
		return p.Thaw()
	}
	return errors.New("thaw kube-proxy: not started")
}

// WaitHealthy waits until healthz answers 200 (after the first full sync),
// failing early if kube-proxy exits.
func (k *KubeProxy) WaitHealthy(ctx context.Context) error {
	began := time.Now()
	var last error
	err := poll(ctx, 100*time.Millisecond, func() (bool, error) {
		if err := k.Process().Err(); err != nil {
			return false, fmt.Errorf("kube-proxy on %s exited: %v; its log ends:\n%s", k.node.Name, err, k.Process().LogTail(20))
		}
		hz, err := k.node.Healthz(ctx)
		last = err
		return err == nil && hz.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		return fmt.Errorf("wait for kube-proxy on %s to be healthy (last error: %v): %w", k.node.Name, last, err)
	}
	k.node.h.t.Logf("k8stest: kube-proxy on %s healthy in %v", k.node.Name, time.Since(began).Round(time.Millisecond))
	return nil
}

// Healthz is kube-proxy's healthz answer.
type Healthz struct {
	// StatusCode is the HTTP status: 200 healthy, 503 not (yet) healthy.
	StatusCode int `json:"-"`
	// LastUpdated is the current time while healthy; use Status's per-family
	// times to learn when rules were last synced.
	LastUpdated  time.Time `json:"lastUpdated"`
	CurrentTime  time.Time `json:"currentTime"`
	NodeEligible *bool     `json:"nodeEligible,omitempty"`
	Healthy      bool      `json:"healthy"`
	// Status is per IP family ("IPv4", "IPv6").
	Status map[string]FamilyHealth `json:"status"`
}

// FamilyHealth is one IP family's proxier state.
type FamilyHealth struct {
	// LastUpdated is when that family's last sync completed.
	LastUpdated time.Time `json:"lastUpdated"`
	Healthy     bool      `json:"healthy"`
}

// Healthz reads the node's kube-proxy healthz from the host, with a 1s
// timeout.
func (n *Node) Healthz(ctx context.Context) (*Healthz, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	url := fmt.Sprintf("http://%s/healthz", netip.AddrPortFrom(n.IP, HealthzPort))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := healthzClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("get kube-proxy healthz of %s: %w", n.Name, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return nil, fmt.Errorf("read kube-proxy healthz of %s: %w", n.Name, err)
	}
	return parseHealthz(resp.StatusCode, body)
}

var healthzClient = &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}

func parseHealthz(status int, body []byte) (*Healthz, error) {
	hz := &Healthz{StatusCode: status}
	if err := json.Unmarshal(body, hz); err != nil {
		return nil, fmt.Errorf("decode kube-proxy healthz (status %d, %q): %w", status, body, err)
	}
	return hz, nil
}
