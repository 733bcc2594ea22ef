package routing

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/hapsuper/hapsuper/routing/kube/kubefake"
)

// auto picks kube-proxy mode when nodes can be listed and this node's
// kube-proxy answers healthz with per-family status, and says why not
// otherwise.
func TestPickMode(t *testing.T) {
	healthz := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, `{"currentTime":"2026-03-02T10:00:12Z","status":{"IPv4":{"lastUpdated":"2026-03-02T10:00:11Z","healthy":true}}}`)
	}))
	t.Cleanup(healthz.Close)
	old := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, `{"lastUpdated":"2026-03-02T10:00:12Z","currentTime":"2026-03-02T10:00:12Z"}`)
	}))
	t.Cleanup(old.Close)
	to := func(target string) dialFunc {
		return func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, target)
		}
	}
	forbidden := fake.NewClientset(node("n1", "10.0.0.1"))
	forbidden.PrependReactor("list", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "nodes"}, "", nil)
	})
	tests := []struct {
		name   string
		client *fake.Clientset
		dial   dialFunc
		want   Mode
		why    string
	}{
		{"kube-proxy answers", fake.NewClientset(node("n1", "10.0.0.1"), node("n2", "10.0.0.2")), to(healthz.Listener.Addr().String()),
			ModeKubeProxy, "kube-proxy healthz of node n1 at 10.0.0.1:10256 answers"},
		{"no list on nodes", forbidden, to(healthz.Listener.Addr().String()), ModeEndpointSlices, "may not list nodes"},
		{"node not listed", fake.NewClientset(node("n2", "10.0.0.2")), to(healthz.Listener.Addr().String()), ModeEndpointSlices, "node n1 not found"},
		{"healthz refused", fake.NewClientset(node("n1", "10.0.0.1")), to(closedAddr(t)), ModeEndpointSlices, "unreachable"},
		{"kube-proxy before 1.33", fake.NewClientset(node("n1", "10.0.0.1")), to(old.Listener.Addr().String()), ModeEndpointSlices, "no per-family status"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := me
			id.NodeName = "n1"
			mode, why := pickMode(t.Context(), kubefake.New(tt.client), id, DefaultHealthzPort, tt.dial)
			if mode != tt.want || !strings.Contains(why, tt.why) {
				t.Fatalf("pickMode = %s (%s), want %s (%s)", mode, why, tt.want, tt.why)
			}
		})
	}
}
