package main

import (
	"context"
	"fmt"
	"net/http"
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
	pat    pattern
	cancel context.CancelFunc
	loops  sync.WaitGroup
	reqs   sync.WaitGroup

	rec harness.Record

	mu     sync.Mutex
	pauses []time.Time // the pause pattern holds back from each for pauseLength
}

// startTraffic starts pat's clients on every node against clusterIP.
func startTraffic(pat pattern, nodes []*k8stest.Node, clusterIP netip.Addr) *traffic {
	ctx, cancel := context.WithCancel(context.Background())
	tr := &traffic{pat: pat, cancel: cancel}
	url := fmt.Sprintf("http://%s/", netip.AddrPortFrom(clusterIP, httpPort))
	h2url := fmt.Sprintf("http://%s/", netip.AddrPortFrom(clusterIP, h2Port))
	for _, n := range nodes {
		switch pat {
		case patNewConns, patPause:
			tr.every(ctx, n.Name, 40*time.Millisecond, n.HTTPClient(2*time.Second), url, true)
		case patSlow:
			tr.every(ctx, n.Name, 200*time.Millisecond, n.HTTPClient(3*time.Second+3*time.Second), url+"slow?d=3s", true)
		case patKeepAlive, patIdlePool:
			every := 80 * time.Millisecond
			if pat == patIdlePool {
				every = idlePoolEvery
			}
			for range 2 {
				c := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
					DialContext: n.DialContext, Proxy: nil, MaxIdleConnsPerHost: 1, IdleConnTimeout: 30 * time.Second,
				}}
				tr.every(ctx, n.Name, every, c, url, false)
			}
		case patH2:
			for range 2 {
				var protos http.Protocols
				protos.SetUnencryptedHTTP2(true)
				c := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
					DialContext: n.DialContext, Proxy: nil, Protocols: &protos,
				}}
				tr.every(ctx, n.Name, 80*time.Millisecond, c, h2url, true)
			}
		}
	}
	return tr
}

// every sends a GET to url every interval from node: each in a goroutine
// of its own when concurrent, else one after the other (ticks are skipped
// while one runs), the first one at once so that the connection is open
// before the first delete.
func (tr *traffic) every(ctx context.Context, node string, interval time.Duration, c *http.Client, url string, concurrent bool) {
	tr.loops.Go(func() {
		tick := time.NewTicker(interval)
		defer tick.Stop()
		defer c.CloseIdleConnections()
		if !concurrent {
			tr.rec.Add(harness.Request(c, node, url))
		}
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-tick.C:
				if tr.paused(now) {
					continue
				}
				if concurrent {
					tr.reqs.Go(func() { tr.rec.Add(harness.Request(c, node, url)) })
				} else {
					tr.rec.Add(harness.Request(c, node, url))
				}
			}
		}
	})
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

// stop ends the clients and waits for the requests in flight (each bounded
// by its client's timeout).
func (tr *traffic) stop() {
	tr.cancel()
	tr.loops.Wait()
	tr.reqs.Wait()
}
