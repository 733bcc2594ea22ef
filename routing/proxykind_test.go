package routing

import (
	"bufio"
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	discovery "k8s.io/api/discovery/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/hapsuper/hapsuper/drain"
	"github.com/hapsuper/hapsuper/routing/judge"
	"github.com/hapsuper/hapsuper/routing/kube/kubefake"
)

// serveRaw answers every request on a loopback listener with the bytes of
// file, as the proxy wrote them (status line, headers, body), and returns
// the listener's address.
func serveRaw(t *testing.T, file string) string {
	t.Helper()
	answer, err := os.ReadFile(filepath.Join("testdata", "proxies", file))
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return // the listener closed
			}
			go func() {
				defer conn.Close()
				conn.SetDeadline(time.Now().Add(5 * time.Second))
				r := bufio.NewReader(conn)
				for {
					if _, err := http.ReadRequest(r); err != nil {
						return
					}
					if _, err := conn.Write(answer); err != nil {
						return
					}
				}
			}()
		}
	}()
	return l.Addr().String()
}

// The answers of each service proxy's healthz, status line and headers
// included, as their sources write them (read 2026-12): kube-proxy 1.37's
// and 1.32's pkg/proxy/healthcheck/proxy_health.go; Calico felix's eBPF
// kube-proxy replacement (bpf/proxy) and Antrea's proxyAll
// (pkg/agent/proxy), which both serve kube-proxy's ProxyHealthServer and
// stamp a family after their datapath writes; Cilium's
// kube-proxy-replacement healthz (pkg/healthz) and OVN-Kubernetes'
// node healthz (go-controller/pkg/node/healthcheck_node.go), which write
// `{"lastUpdated": %q,"currentTime": %q}` of Go times. The first three
// are evidence of a sync; the emulations never are; kube-proxy before
// 1.33 has no per-family stamp.
func TestFetchNamesTheProxy(t *testing.T) {
	tests := []struct {
		file     string
		proxy    judge.Proxy
		families []discovery.AddressType // accepted with these; nil: not evidence
		errHas   string                  // the poll fails saying this
	}{
		{file: "kube-proxy-1.37.http", proxy: judge.ProxyKubeProxy, families: []discovery.AddressType{"IPv4"}},
		{file: "calico-ebpf.http", proxy: judge.ProxyKubeProxy, families: []discovery.AddressType{"IPv4"}},
		{file: "antrea-proxyall.http", proxy: judge.ProxyKubeProxy, families: []discovery.AddressType{"IPv4", "IPv6"}},
		{file: "kube-proxy-1.32.http", proxy: judge.ProxyKubeProxyOld, errHas: "no per-family status"},
		{file: "cilium.http", proxy: judge.ProxyEmulated},
		{file: "cilium-unhealthy.http", proxy: judge.ProxyEmulated},
		{file: "ovn-kubernetes.http", proxy: judge.ProxyOVN},
		{file: "ovn-kubernetes-terminating.http", proxy: judge.ProxyEmulated},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			addr := serveRaw(t, tt.file)
			hc := newHealthzClient((&net.Dialer{}).DialContext, time.Second)
			defer hc.CloseIdleConnections()
			h, _, _, _, err := hc.fetch(t.Context(), addr, 5*time.Second)
			if tt.errHas != "" {
				var pe *judge.PollError
				if !errors.As(err, &pe) || pe.Proxy != tt.proxy || !strings.Contains(pe.Msg, tt.errHas) {
					t.Fatalf("fetch = %+v, %v; want a poll error naming %v, saying %q", h, err, tt.proxy, tt.errHas)
				}
				return
			}
			if err != nil {
				t.Fatalf("fetch: %v", err)
			}
			if h.Proxy != tt.proxy {
				t.Fatalf("proxy = %v, want %v", h.Proxy, tt.proxy)
			}
			if h.Proxy.NoSync() != (tt.families == nil) {
				t.Fatalf("%v: NoSync = %v, want %v", h.Proxy, h.Proxy.NoSync(), tt.families == nil)
			}
			if len(h.Families) != len(tt.families) {
				t.Fatalf("families = %v, want %v", h.Families, tt.families)
			}
			for _, f := range tt.families {
				if _, ok := h.Families[f]; !ok {
					t.Fatalf("families = %v, want %v", h.Families, tt.families)
				}
			}
		})
	}
}

// Only the emulation's exact shape is named so; anything else stays "not
// kube-proxy healthz".
func TestParseEmulatedRejects(t *testing.T) {
	const now = "2026-03-02 10:00:07.412309871 +0000 UTC m=+3421.004512311"
	tests := []struct {
		name   string
		status int
		body   string
	}{
		{"kube-proxy's RFC 3339 times", 200, `{"lastUpdated":"2026-03-02T10:00:07Z","currentTime":"2026-03-02T10:00:07Z"}`},
		{"a third key", 200, `{"lastUpdated": "` + now + `","currentTime": "` + now + `","healthy":true}`},
		{"lastUpdated after currentTime", 200, `{"lastUpdated": "2026-03-02 10:00:08 +0000 UTC","currentTime": "` + now + `"}`},
		{"another status", 500, `{"lastUpdated": "` + now + `","currentTime": "` + now + `"}`},
		{"trailing data", 200, `{"lastUpdated": "` + now + `","currentTime": "` + now + `"}{}`},
		{"numbers", 200, `{"lastUpdated": 1,"currentTime": 2}`},
		{"no current time", 200, `{"lastUpdated": "0001-01-01 00:00:00 +0000 UTC","currentTime": "0001-01-01 00:00:00 +0000 UTC"}`},
	}
	for _, tt := range tests {
		if h, ok := parseEmulated(tt.status, []byte(tt.body)); ok {
			t.Errorf("%s: parseEmulated = %+v, want rejected", tt.name, h)
		}
	}
}

// A node whose healthz is Cilium's or OVN-Kubernetes' emulation never
// confirms, however late its lastUpdated: the node is unverified, named
// with the proxy, and the drain ends `unverified` on the quiet period
// (bounded by max wait), never `routed-away`; the other nodes are still
// judged.
func TestConfirmEmulatedHealthzNeverConfirms(t *testing.T) {
	for _, file := range []string{"cilium.http", "ovn-kubernetes.http"} {
		t.Run(file, func(t *testing.T) {
			answer, err := os.ReadFile(filepath.Join("testdata", "proxies", file))
			if err != nil {
				t.Fatal(err)
			}
			_, body, _ := strings.Cut(string(answer), "\r\n\r\n")
			s := newLateScenario(t, Config{}, "n2", "n3")
			// n2's kube-proxy syncs the withdrawal, and again later: it
			// answered without per-family status before its first stamp,
			// which may then be its sync loop's start (as a restarted
			// kube-proxy's is); the second is a sync.
			s.syncsAt("n2", 1100*ms, 2100*ms)
			s.proxies["n3"].set(func(p *fakeProxy) { p.body = body })
			for off := 500 * ms; off <= 10*time.Second; off += 500 * ms {
				got := s.round(off)
				if got.State == drain.RoutingWithdrawn {
					t.Fatalf("withdrawn at R+%v on an emulated healthz's word: %+v", off, got)
				}
			}
			expect(t, s.round(10*time.Second), drain.RoutingUnverified,
				"kube-proxy not observed on 1 of 2 nodes: n3: healthz at 10.0.0.3:10256 answers as", "kube-proxy healthz emulation", "never a rule sync", "confirmed on the others")
		})
	}
}

// A node whose kube-proxy answered the baseline and whose healthz then
// answers as an emulation (the proxy replaced during the drain) keeps the
// baseline's sync, which predates the change: pending, the bound at worst,
// naming what answered last.
func TestConfirmEmulatedAfterBaseline(t *testing.T) {
	answer, err := os.ReadFile(filepath.Join("testdata", "proxies", "cilium.http"))
	if err != nil {
		t.Fatal(err)
	}
	_, body, _ := strings.Cut(string(answer), "\r\n\r\n")
	s := newScenario(t, Config{}, "n2")
	s.proxies["n2"].set(func(p *fakeProxy) { p.body = body })
	for off := 500 * ms; off <= 10*time.Second; off += 500 * ms {
		if got := s.round(off); got.State != drain.RoutingPending {
			t.Fatalf("routing at R+%v = %s (%s), want pending", off, got.State, got.Detail())
		}
	}
	expect(t, s.round(10*time.Second), drain.RoutingPending, "no sync since the change", "last poll failed: healthz at 10.0.0.2:10256 answers as Cilium's kube-proxy replacement")
}

// FuzzParseEmulated: an answer taken for an emulation carries no family,
// names a proxy whose stamp is no sync, and is not after its own time.
func FuzzParseEmulated(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "proxies", "*.http"))
	for _, file := range files {
		if b, err := os.ReadFile(file); err == nil {
			_, body, _ := strings.Cut(string(b), "\r\n\r\n")
			f.Add(200, []byte(body))
			f.Add(503, []byte(body))
		}
	}
	f.Add(200, []byte(`{"lastUpdated": "0001-01-01 00:00:00 +0000 UTC","currentTime": "2026-03-02 10:00:07 +0000 UTC"}`))
	f.Fuzz(func(t *testing.T, status int, body []byte) {
		h, ok := parseEmulated(status, body)
		if !ok {
			return
		}
		if !h.Proxy.NoSync() || len(h.Families) != 0 || h.CurrentTime.IsZero() {
			t.Fatalf("accepted %d %q as %+v", status, body, h)
		}
		if status != 200 && status != 503 {
			t.Fatalf("accepted HTTP %d", status)
		}
	})
}

// auto picks endpointslices when this node's healthz is Cilium's, and says
// which proxy answered.
func TestPickModeEmulated(t *testing.T) {
	addr := serveRaw(t, "cilium.http")
	dial := func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}
	id := me
	id.NodeName = "n1"
	mode, why := pickMode(t.Context(), kubefake.New(fake.NewClientset(node("n1", "10.0.0.1"))), id, DefaultHealthzPort, dial)
	if mode != ModeEndpointSlices || !strings.Contains(why, "answers as Cilium's kube-proxy replacement or OVN-Kubernetes") {
		t.Fatalf("pickMode = %s (%s), want endpointslices naming the proxy", mode, why)
	}
}
