package routing

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// connCounter is a metrics server that counts the connections it accepted
// and serves kubeProxyMetrics followed by tail bytes of other families.
type connCounter struct {
	srv  *httptest.Server
	tail string

	mu    sync.Mutex
	conns int
}

func newConnCounter(t *testing.T, tail int) *connCounter {
	c := &connCounter{tail: strings.Repeat("workqueue_x 1\n", tail/14+1)}
	c.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, kubeProxyMetrics)
		fmt.Fprint(w, c.tail)
	}))
	c.srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			c.mu.Lock()
			c.conns++
			c.mu.Unlock()
		}
	}
	c.srv.Start()
	t.Cleanup(c.srv.Close)
	return c
}

func (c *connCounter) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.conns
}

// The metrics of a node are read over one kept connection, round after
// round, as healthz's are: the answer is read past the samples to its end.
// An answer whose rest is longer than maxMetricsRest is not read to its end:
// its connection is closed, and the next read dials again.
func TestMetricsClientKeepsTheConnection(t *testing.T) {
	for _, tc := range []struct {
		name  string
		tail  int
		conns int
	}{
		{"rest within the bound", 64 << 10, 1},
		{"rest beyond the bound", maxMetricsRest + 1<<10, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newConnCounter(t, tc.tail)
			mc := testMetricsClient()
			defer mc.CloseIdleConnections()
			for i := range 3 {
				m, _, err := mc.fetch(context.Background(), srv.srv.Listener.Addr().String(), 5*time.Second)
				if err != nil || m.ProcessStart.IsZero() {
					t.Fatalf("read %d: %+v, %v", i, m, err)
				}
			}
			if got := srv.count(); got != tc.conns {
				t.Errorf("3 reads took %d connections, want %d", got, tc.conns)
			}
		})
	}
}

// A kept connection the node closed meanwhile (kube-proxy restarted, or
// its server's idle timeout) is dialled again, and the read succeeds.
func TestMetricsClientRedialsAClosedConnection(t *testing.T) {
	srv := newConnCounter(t, 0)
	mc := testMetricsClient()
	defer mc.CloseIdleConnections()
	addr := srv.srv.Listener.Addr().String()
	if _, _, err := mc.fetch(context.Background(), addr, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	srv.srv.CloseClientConnections()
	m, _, err := mc.fetch(context.Background(), addr, 5*time.Second)
	if err != nil || m.ProcessStart.IsZero() {
		t.Fatalf("after the node closed the kept connection: %+v, %v", m, err)
	}
	if got := srv.count(); got != 2 {
		t.Errorf("%d connections, want 2 (the first, closed by the node, and one more)", got)
	}
}
