package check

import (
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
)

// `hapsuper check` names the proxy that answered each node's healthz: n1
// kube-proxy's code, n3 Cilium's kube-proxy replacement (its answer as
// Cilium writes it), whose word proves no sync: a WARN that says what a
// drain does there and the honest setting.
func TestRun_KubeProxyReplacementNamed(t *testing.T) {
	c := newCluster(t)
	const cilium = `{"lastUpdated": "2026-03-02 10:00:07.412309871 +0000 UTC m=+3421.004512311","currentTime": "2026-03-02 10:00:07.412309871 +0000 UTC m=+3421.004512311"}`
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(cilium))
	}))
	defer srv.Close()
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.3", c.healthzPort(t)))
	if err != nil {
		t.Fatal(err)
	}
	srv.Listener.Close()
	srv.Listener = l
	srv.Start()
	c.objects = append(c.objects, node("n3", "127.0.0.3"))
	r := c.run(t, c.kubeProxy(t, gracefulCfg))
	if code := r.ExitCode(); code != 1 {
		t.Errorf("exit code %d, want 1", code)
	}
	want(t, r, AreaKubeProxy, "node n1", OK, "answers as kube-proxy's healthz (kube-proxy, or Calico eBPF or Antrea proxyAll, which embed it): IPv4 last sync")
	want(t, r, AreaKubeProxy, "node n3", Warn, "answers as Cilium's kube-proxy replacement or OVN-Kubernetes")
	want(t, r, AreaKubeProxy, "node n3", Warn, "set --routing endpointslices")
}
