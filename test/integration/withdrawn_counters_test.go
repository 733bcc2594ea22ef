package integration

import (
	"strings"
	"testing"
	"time"

	"github.com/hapsuper/hapsuper/test/harness"
)

// TestWithdrawnCounters_PerFrontend: what the drain counts once routing is
// withdrawn, read from real HAProxy. Requests on a kept-alive HTTP/1.1
// connection of frontend web (no option idle-close-on-response: its soft
// stop cuts idle connections) and h2c streams on one connection of frontend
// h2 (graceful) raise the status's requests by both; its connections rise by
// web's requests only, and by one for a new TCP connection. The start
// warning names web and the option, and not h2.
func TestWithdrawnCounters_PerFrontend(t *testing.T) {
	eachHAProxy(t, func(t *testing.T, h haproxyVersion) {
		cfg := newConfig(t)
		cfg.WebNoIdleClose = true
		s := serve(t, h, cfg, fast.flags()...)

		warnings := s.warnings("idle-close-on-response")
		if len(warnings) != 1 || !strings.HasPrefix(warnings[0], "frontend web:") {
			t.Errorf("warnings about idle-close-on-response: %q, want one, naming frontend web", warnings)
		}

		web, err := dialHTTP1(cfg.webAddr(), 1)
		if err != nil {
			t.Fatal(err)
		}
		defer web.c.Close()
		h2 := newH2Client(cfg.h2Addr())
		defer h2.close()
		// Open both connections, then take the baseline.
		if o := web.get("/", false, requestTimeout); o.kind != harness.KindOK {
			t.Fatalf("first request on web: %+v", o)
		}
		if o := h2.get("/", requestTimeout); o.kind != harness.KindOK {
			t.Fatalf("first h2c request: %+v", o)
		}
		before := s.settledCounters(t)

		const n = 10
		for range n {
			if o := web.get("/", false, requestTimeout); o.kind != harness.KindOK {
				t.Fatalf("kept-alive request on web: %+v", o)
			}
			if o := h2.get("/", requestTimeout); o.kind != harness.KindOK {
				t.Fatalf("h2c request: %+v", o)
			}
		}
		if conns := len(h2.connections()); conns != 1 {
			t.Fatalf("the h2c client opened %d connections, want 1", conns)
		}
		afterKeepAlive := s.settledCounters(t)
		holdTCP(t, cfg.tcpAddr()) // closed at the test's end
		afterTCP := s.settledCounters(t)

		t.Logf("requests/connections: before %v, after %d kept-alive requests on web and %d h2c streams %v, after a TCP connection %v",
			before, n, n, afterKeepAlive, afterTCP)
		if d := afterKeepAlive[0] - before[0]; d < 2*n {
			t.Errorf("requests rose by %d over %d kept-alive requests and %d streams, want at least %d", d, n, n, 2*n)
		}
		if d := afterKeepAlive[1] - before[1]; d != n {
			t.Errorf("connections rose by %d, want %d: web's requests count (not graceful), h2's streams on an open connection do not", d, n)
		}
		if d := afterTCP[1] - afterKeepAlive[1]; d != 1 {
			t.Errorf("connections rose by %d for one new TCP connection, want 1", d)
		}
	})
}

// settledCounters returns the current workers' summed requests and
// connections from the status once two readings 1.2 s apart agree (while
// HAProxy serves, the poller reads the master CLI every second), at most 8 s.
func (s *supervisor) settledCounters(t *testing.T) [2]int64 {
	t.Helper()
	sum := func(d statusDoc) [2]int64 {
		var c [2]int64
		for _, w := range d.Workers {
			if !w.Old {
				c[0] += w.Requests
				c[1] += w.Connections
			}
		}
		return c
	}
	prev := sum(s.statusJSON())
	for end := time.Now().Add(8 * time.Second); time.Now().Before(end); {
		time.Sleep(1200 * time.Millisecond)
		cur := sum(s.statusJSON())
		if cur == prev {
			return cur
		}
		prev = cur
	}
	t.Fatalf("counters still moving after 8 s: %v", prev)
	return prev
}
