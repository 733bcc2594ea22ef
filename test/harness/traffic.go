package harness

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"
)

// Traffic runs clients that each send a GET periodically and records every
// outcome (Request's classification).
type Traffic struct {
	Record

	ctx    context.Context
	cancel context.CancelFunc
	hold   func(node string, now time.Time) bool
	loops  sync.WaitGroup
	reqs   sync.WaitGroup
}

// NewTraffic returns a Traffic whose clients skip a tick when hold (nil:
// never) says so for their node.
func NewTraffic(hold func(node string, now time.Time) bool) *Traffic {
	ctx, cancel := context.WithCancel(context.Background())
	return &Traffic{ctx: ctx, cancel: cancel, hold: hold}
}

// Every sends a GET of url with c, as node, every interval until Stop.
// Concurrent: each request in a goroutine of its own, so that a slow one
// does not delay the next (new-connection clients). Else one after the
// other on c's connections, the first at once so that the connection is
// open early; a tick that comes while a request runs waits for it.
func (tr *Traffic) Every(node string, c *http.Client, url string, interval time.Duration, concurrent bool) {
	tr.loops.Go(func() {
		tick := time.NewTicker(interval)
		defer tick.Stop()
		defer c.CloseIdleConnections()
		if !concurrent {
			tr.Add(Request(c, node, url))
		}
		for {
			select {
			case <-tr.ctx.Done():
				return
			case now := <-tick.C:
				switch {
				case tr.hold != nil && tr.hold(node, now):
				case concurrent:
					tr.reqs.Go(func() { tr.Add(Request(c, node, url)) })
				default:
					tr.Add(Request(c, node, url))
				}
			}
		}
	})
}

// Stop ends the clients and waits for the requests in flight (each bounded
// by its client's timeout).
func (tr *Traffic) Stop() {
	tr.cancel()
	tr.loops.Wait()
	tr.reqs.Wait()
}

// Where returns the outcomes, by send time, for which keep holds.
func (tr *Traffic) Where(keep func(Outcome) bool) []Outcome {
	var out []Outcome
	for _, o := range tr.Outcomes() {
		if keep(o) {
			out = append(out, o)
		}
	}
	return out
}

// Dialer is how a client reaches the cluster: a node's or a pod's
// DialContext.
type Dialer func(ctx context.Context, network, addr string) (net.Conn, error)

// KeepAliveClient is an HTTP/1.1 client holding one kept-alive connection.
func KeepAliveClient(dial Dialer, timeout time.Duration) *http.Client {
	return &http.Client{Timeout: timeout, Transport: &http.Transport{
		DialContext: dial, Proxy: nil, MaxIdleConnsPerHost: 1, IdleConnTimeout: time.Minute,
	}}
}

// H2CClient is an HTTP/2 client without TLS (prior knowledge).
func H2CClient(dial Dialer, timeout time.Duration) *http.Client {
	var h2c http.Protocols
	h2c.SetUnencryptedHTTP2(true)
	return &http.Client{Timeout: timeout, Transport: &http.Transport{DialContext: dial, Proxy: nil, Protocols: &h2c}}
}

// WaitListening dials addr with dial (nil: this host's network) until it
// accepts a connection, at most timeout.
func WaitListening(dial Dialer, addr string, timeout time.Duration) error {
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	end := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		c, err := dial(ctx, "tcp", addr)
		cancel()
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(end) {
			return fmt.Errorf("%s does not accept connections after %s: %w", addr, timeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
