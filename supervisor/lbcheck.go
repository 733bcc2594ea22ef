package supervisor

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"sync/atomic"

	"github.com/hapsuper/hapsuper/drain"
	"github.com/hapsuper/hapsuper/haproxy"
	"github.com/hapsuper/hapsuper/runtimeapi"
)

// The health check of load balancers that target the pod itself (IP
// targets, hostNetwork, hostPort): --lb-check-bind. The override file adds a
// frontend on that address answering 200 while its backend's one server is
// usable, 503 once it is not, with a stick table counting each source
// address's requests (haproxy.LBCheck). From the stop on, the poller puts that
// server in maintenance on every worker (`set server … state maint`, on new
// workers too), so every check fails, and reads the tables each poll. The
// load balancer has marked the pod down once every address that was
// checking (a request in the two minutes before the stop, or any since:
// an address whose count grows after its first reading) has had its
// unhealthy threshold of failed checks since; until then the routing
// condition is pending.

// lbChecker is the master CLI as the health check uses it.
type lbChecker interface {
	SetServerState(ctx context.Context, pid int, server, state string) error
	ShowTable(ctx context.Context, pid int, name string) ([]runtimeapi.TableEntry, error)
}

// lbCheckIO is the poller's part: it fails the check on every worker once
// the loop asked (failing), and reads every worker's table.
type lbCheckIO struct {
	cli     lbChecker
	failing atomic.Bool  // set by the loop at the stop request
	failed  map[int]bool // workers whose check fails; the poller's goroutine only
}

// lbTables is one poll's reading of the tables: per worker, or the error
// that stopped it.
type lbTables struct {
	byWorker map[int][]runtimeapi.TableEntry
	err      error
}

// poll fails the check on the workers not failed yet and reads every
// worker's table; it does nothing before the stop.
func (c *lbCheckIO) poll(ctx context.Context, s runtimeapi.Sample) *lbTables {
	if c == nil || !c.failing.Load() {
		return nil
	}
	if c.failed == nil {
		c.failed = map[int]bool{}
	}
	t := &lbTables{byWorker: map[int][]runtimeapi.TableEntry{}}
	for _, w := range s.Workers {
		pid := w.Process.PID
		if !c.failed[pid] {
			if err := c.cli.SetServerState(ctx, pid, haproxy.LBCheckServer, "maint"); err != nil {
				t.err = fmt.Errorf("fail the load balancer's check on worker %d: %w", pid, err)
				return t
			}
			c.failed[pid] = true
		}
		entries, err := c.cli.ShowTable(ctx, pid, haproxy.LBCheck)
		if err != nil {
			t.err = err
			return t
		}
		t.byWorker[pid] = entries
	}
	return t
}

// lbCheck follows the failed checks from the stop on. Pure: fed the
// poller's readings by the loop.
type lbCheck struct {
	bind      string
	threshold int
	base      map[int]map[string]uint64 // per worker: each address's requests at the first reading after its check failed
	last      map[int]map[string]uint64 // per worker: at the latest reading (kept when the worker is gone)
	active    map[string]bool           // the addresses that are checking
	err       string                    // the last reading's error
}

// observe applies one reading.
func (c *lbCheck) observe(t *lbTables) {
	if t == nil {
		return
	}
	if t.err != nil {
		c.err = t.err.Error()
	} else {
		c.err = ""
	}
	if c.base == nil {
		c.base, c.last, c.active = map[int]map[string]uint64{}, map[int]map[string]uint64{}, map[string]bool{}
	}
	for pid, entries := range t.byWorker {
		now := map[string]uint64{}
		for _, e := range entries {
			now[e.Key] = e.Requests
		}
		if _, seen := c.base[pid]; !seen && len(c.base) > 0 {
			// A reload's new worker answered 200 until this poll failed
			// its check: a balancer counting consecutive failures may
			// have started again, so every address counts afresh.
			for p, last := range c.last {
				c.base[p] = maps.Clone(last)
			}
		}
		if _, seen := c.base[pid]; !seen {
			c.base[pid] = now
			for _, e := range entries {
				if e.Rate > 0 {
					c.active[e.Key] = true // checked in the two minutes before
				}
			}
		} else {
			for k, n := range now {
				b, had := c.base[pid][k]
				switch {
				case !had:
					c.base[pid][k] = 0 // began checking since: every request failed
					c.active[k] = true
				case n > b:
					c.active[k] = true // idle at the first reading, checking again since
				}
			}
		}
		c.last[pid] = now
	}
}

// failedChecks is, per checking address, the checks answered 503 since.
func (c *lbCheck) failedChecks() map[string]uint64 {
	out := map[string]uint64{}
	for k := range c.active {
		out[k] = 0
	}
	for pid, now := range c.last {
		for k, n := range now {
			if b := c.base[pid][k]; n > b && c.active[k] {
				out[k] += n - b
			}
		}
	}
	return out
}

// condition is where the check stands, for the drain, which combines it
// with the routing verdict (drain.PodCheck).
func (c *lbCheck) condition() drain.PodCheck {
	p := drain.PodCheck{Bind: c.bind, Threshold: c.threshold, Failing: c.base != nil, Err: c.err}
	if !p.Failing {
		p.Err = ""
		return p
	}
	failed := c.failedChecks()
	for _, k := range slices.Sorted(maps.Keys(failed)) {
		p.Failed = append(p.Failed, drain.AddrChecks{Addr: addrOf(k), Failed: failed[k]})
	}
	return p
}

// addrOf writes an IPv4-mapped key as IPv4.
func addrOf(key string) string {
	if a, err := netip.ParseAddr(key); err == nil {
		return a.Unmap().String()
	}
	return key
}
