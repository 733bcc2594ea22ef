package main

import (
	"fmt"
	"net/netip"
	"sync"
	"time"

	"github.com/hapsuper/hapsuper/test/harness"
	"github.com/hapsuper/hapsuper/test/k8s/k8stest"
)

// pattern is a client behaviour; every one runs from each node's network
// namespace through the Service's ClusterIP, about 50 requests/s in all
// (slow: 10/s, 3 s each).
type pattern string

// The client patterns.
const (
	patNewConns  pattern = "new-conns"  // a new connection per request, every 40 ms per node
	patKeepAlive pattern = "keep-alive" // HTTP/1.1, two persistent connections per node, a request every 80 ms on each
	patH2        pattern = "h2"         // h2c, two connections per node, a stream every 80 ms on each
	patPause     pattern = "pause"      // new-conns that pauses 3 s from each delete, then resumes
	patSlow      pattern = "slow"       // new connection per request, /slow?d=3s every 200 ms per node
	// patIdlePool: HTTP/1.1, two pooled connections per node, each idle for
	// 3 s (longer than the quiet period) between requests.
	patIdlePool pattern = "idle-pool"
)

var allPatterns = []pattern{patNewConns, patKeepAlive, patH2, patPause, patSlow, patIdlePool}

// idlePoolEvery is the idle-pool pattern's gap between requests on one
// connection: past the 2 s quiet period.
const idlePoolEvery = 3 * time.Second

// pauseLength is how long the pause pattern holds back after a delete:
// past the 2 s quiet period.
const pauseLength = 3 * time.Second

// traffic runs one pattern's clients and records every outcome.
type traffic struct {
	*harness.Traffic
	pat pattern

	mu     sync.Mutex
	pauses []time.Time // the pause pattern holds back from each for pauseLength
}

// startTraffic starts pat's clients on every node against clusterIP.
func startTraffic(pat pattern, nodes []*k8stest.Node, clusterIP netip.Addr) *traffic {
	tr := &traffic{pat: pat}
	tr.Traffic = harness.NewTraffic(func(_ string, now time.Time) bool { return tr.paused(now) })
	url := fmt.Sprintf("http://%s/", netip.AddrPortFrom(clusterIP, httpPort))
	h2url := fmt.Sprintf("http://%s/", netip.AddrPortFrom(clusterIP, h2Port))
	for _, n := range nodes {
		switch pat {
		case patNewConns, patPause:
			tr.Every(n.Name, n.HTTPClient(2*time.Second), url, 40*time.Millisecond, true)
		case patSlow:
			tr.Every(n.Name, n.HTTPClient(3*time.Second+3*time.Second), url+"slow?d=3s", 200*time.Millisecond, true)
		case patKeepAlive, patIdlePool:
			every := 80 * time.Millisecond
			if pat == patIdlePool {
				every = idlePoolEvery
			}
			for range 2 {
				tr.Every(n.Name, harness.KeepAliveClient(n.DialContext, 2*time.Second), url, every, false)
			}
		case patH2:
			for range 2 {
				tr.Every(n.Name, harness.H2CClient(n.DialContext, 2*time.Second), h2url, 80*time.Millisecond, true)
			}
		}
	}
	return tr
}

// deleted tells the pause pattern that a pod was deleted at t.
func (tr *traffic) deleted(t time.Time) {
	if tr.pat != patPause {
		return
	}
	tr.mu.Lock()
	tr.pauses = append(tr.pauses, t)
	tr.mu.Unlock()
}

// paused says whether the pause pattern holds back at now.
func (tr *traffic) paused(now time.Time) bool {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for _, t := range tr.pauses {
		if !now.Before(t) && now.Before(t.Add(pauseLength)) {
			return true
		}
	}
	return false
}
