package k8s_test

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/hapsuper/hapsuper/test/k8s/k8stest"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Service web has two ports with named targetPorts: http (80) and admin
// (81). web-a names both container ports, web-b only http, so the
// EndpointSlice controller lists web-b under http alone. When web-a is
// deleted, web-b is a ready endpoint for http but not for admin:
// kube-proxy falls back to web-a's serving-terminating endpoint for admin
// and keeps sending admin connections to it. hapsuper must not call web-a
// withdrawn: the drain holds until the bound, naming the admin port, and
// nothing sent before it ended fails.
func TestDrain_PortWithoutPeer(t *testing.T) {
	e := newDrainEnv(t, k8stest.Options{Nodes: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ip, err := e.Service(ctx, "web", false,
		corev1.ServicePort{Name: "http", Port: 80, TargetPort: intstr.FromString("http")},
		corev1.ServicePort{Name: "admin", Port: 81, TargetPort: intstr.FromString("admin")})
	if err != nil {
		t.Fatal(err)
	}
	httpURL := fmt.Sprintf("http://%s/", netip.AddrPortFrom(ip, 80))
	adminURL := fmt.Sprintf("http://%s/", netip.AddrPortFrom(ip, 81))
	ports := func(names ...string) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			for _, n := range names {
				p.Spec.Containers[0].Ports = append(p.Spec.Containers[0].Ports, corev1.ContainerPort{Name: n, ContainerPort: 8080})
			}
		}
	}
	a := e.startPodWith(t, 1, "web-a", "web", podOptions{edit: ports("http", "admin")})
	b := e.startPodWith(t, 2, "web-b", "web", podOptions{edit: ports("http")})
	a.ready(t)
	b.ready(t)
	e.waitRouted(t, httpURL, map[int][]string{1: {"web-a", "web-b"}, 2: {"web-a", "web-b"}})
	e.waitRouted(t, adminURL, map[int][]string{1: {"web-a"}, 2: {"web-a"}})

	httpTr := startTraffic(t, httpURL, e.H.Nodes(), nil)
	adminTr := startTraffic(t, adminURL, e.H.Nodes(), nil)
	a.terminate(t)
	r := a.afterStop(t, httpTr, true)
	adminTr.Stop()
	t.Logf("admin clients: %s", adminTr.summary())

	checkNoFailures(t, httpTr, r.Ended)
	checkNoFailuresBeforeBound(t, adminTr, r) // admin is still routed here at the bound
	checkBound(t, r, adminTr, "")             // kube-proxy's per-port fallback
	if !strings.Contains(r.Detail, "port admin/TCP") {
		t.Errorf("drain detail %q: want the admin port named", r.Detail)
	}
}
