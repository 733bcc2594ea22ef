package judge

import (
	"runtime"
	"testing"
	"time"

	discovery "k8s.io/api/discovery/v1"
)

// factsHeap is the heap per node that stays live once nodes nodes went
// through a drain's answers as the fan-out sees them: a baseline before
// the node's sync, then two answers showing it; with metrics, each healthz
// answer followed by a metrics answer (a change pending, then none). With
// serving, the baseline is that many answers a minute apart while the
// pod serves (no metrics read), before the drain's.
func factsHeap(t *testing.T, nodes int, metrics bool, serving int) float64 {
	t.Helper()
	t0 := time.Unix(1_800_000_000, 0)
	ns := make([]*Node, nodes)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range ns {
		ns[i] = NewNode("node-0042", "127.1.0.43:10256")
	}
	for k := range serving {
		at := t0.Add(time.Duration(k-serving) * time.Minute)
		for _, n := range ns {
			h := Healthz{CurrentTime: at, Proxy: ProxyKubeProxy,
				Families: map[discovery.AddressType]FamilyHealth{discovery.AddressTypeIPv4: {LastUpdated: t0.Add(-2 * time.Hour), Healthy: true}}}
			n.Record(h, at, at.Add(2*time.Millisecond), time.Second, k > 0)
		}
	}
	for k := range 3 {
		at := t0.Add(time.Duration(k) * 500 * time.Millisecond)
		last, pending := t0.Add(-5*time.Second), 1
		if k > 0 {
			last, pending = t0.Add(400*time.Millisecond), 0
		}
		for _, n := range ns {
			h := Healthz{CurrentTime: at, Proxy: ProxyKubeProxy,
				Families: map[discovery.AddressType]FamilyHealth{discovery.AddressTypeIPv4: {LastUpdated: last, Healthy: true}}}
			n.Record(h, at, at.Add(2*time.Millisecond), time.Second, k > 0 || serving > 0)
			if metrics {
				m := Metrics{ProcessStart: t0.Add(-time.Hour), Pending: pending, HasPending: true,
					Synced: map[discovery.AddressType]time.Time{discovery.AddressTypeIPv4: last.Add(20 * time.Microsecond)}}
				n.RecordMetrics(m, at.Add(3*time.Millisecond), at.Add(4*time.Millisecond))
			}
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(ns)
	return float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(nodes)
}

// What a node keeps is paid thousands of times over in a drain's fan-out
// and, with the baseline, for the pod's whole life (docs/benchmarks.md):
// its facts are slices of a family or two, not maps, and what only the
// metrics witness needs is allocated when it reads them. Measured: 573
// bytes a node with healthz alone and 2,304 with the metrics witness when
// they were maps; 413 and 704 as slices; 269 and 640 (288 and 640 after
// 30 answers while serving) since the metrics' facts are a pointer, the
// bools packed, and a sync's stamp, its family and the connection's first
// answer smaller; 205 and 640 (224 after 30 answers while serving) since
// the bounds of a sync's completion, its last quick answer and a stall's
// start are 8-byte instants (syncFacts 128 → 80 bytes, Node 144 → 128).
func TestNodeFactsHeap(t *testing.T) {
	for _, c := range []struct {
		metrics bool
		serving int     // baseline answers while serving, before the drain's
		limit   float64 // bytes a node
	}{{false, 0, 250}, {false, 30, 250}, {true, 0, 700}, {true, 30, 700}} {
		got := factsHeap(t, 2000, c.metrics, c.serving)
		t.Logf("metrics %v, %d answers while serving: %.0f bytes a node", c.metrics, c.serving, got)
		if got > c.limit {
			t.Errorf("metrics %v, %d answers while serving: %.0f bytes of heap a node, want at most %.0f", c.metrics, c.serving, got, c.limit)
		}
	}
}
