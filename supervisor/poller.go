package supervisor

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/hapsuper/hapsuper/conf"
	"github.com/hapsuper/hapsuper/drain"
	"github.com/hapsuper/hapsuper/runtimeapi"
)

// sampler is what the poller needs of the master CLI.
type sampler interface {
	Sample(ctx context.Context) (runtimeapi.Sample, error)
}

// servingPollInterval is how often the master CLI is read while HAProxy
// serves and no drain is under way (conf.ServingPollInterval, which says why).
const servingPollInterval = conf.ServingPollInterval

// poller reads HAProxy's counters and hands each result to the loop. It
// never decides anything: a failed poll is an observation too.
//
// It reads every interval while fast, every serving while slow; the loop
// sets the pace (fast until HAProxy serves, and from the stop request on). A
// switch to fast polls at once: the first reading after the stop request is
// taken then, not up to serving later.
type poller struct {
	cli      sampler
	interval time.Duration   // fast
	serving  time.Duration   // slow
	pace     <-chan bool     // true: fast; the latest value counts
	ignore   map[string]bool // frontends whose traffic does not count
	graceful *frontendSet    // HTTP frontends whose soft stop is graceful (haproxy.Frontend.Graceful), as the last inspection says
	now      func() time.Time
	answered map[int]bool // workers that answered a sample, of those show proc still lists
	lb       *lbCheckIO   // the load balancers' health check of the pod; nil: none

	// A failed poll while HAProxy reloads is marked so (reloading.go):
	// running says whether the master process runs (nil: never judged
	// reloading), seen is when HAProxy was last seen reloading, shared
	// with the loop; counted is the master's reload count at the last
	// successful sample (counting: there was one).
	running  func() bool
	seen     *reloadSeen
	counted  int
	counting bool
}

// run polls until ctx ends, fast until the loop says otherwise. Each poll
// is bounded by the client's timeout.
func (p *poller) run(ctx context.Context, out chan<- observation) error {
	fast := true
	tick := time.NewTicker(p.interval)
	defer tick.Stop()
	for {
		started := p.now()
		s, err := p.cli.Sample(ctx)
		o := observation{started: started, sample: s, obs: p.observe(s, err)}
		if err == nil {
			o.lb = p.lb.poll(ctx, s)
		}
		select {
		case out <- o:
		case <-ctx.Done():
			return nil
		}
		if !p.wait(ctx, tick, &fast) {
			return nil
		}
	}
}

// wait returns when the next poll is due: at the tick, or at once when the
// pace turns fast. It returns false when ctx ends.
func (p *poller) wait(ctx context.Context, tick *time.Ticker, fast *bool) bool {
	for {
		select {
		case <-tick.C:
			return true
		case f := <-p.pace:
			if f == *fast {
				continue
			}
			*fast = f
			if !f {
				tick.Reset(p.slow())
				continue
			}
			tick.Reset(p.interval)
			return true
		case <-ctx.Done():
			return false
		}
	}
}

// slow is the serving interval, never faster than the fast one.
func (p *poller) slow() time.Duration { return max(p.serving, p.interval) }

// pace is the poller's rate as the loop sets it; the channel holds the
// latest setting. Only the loop calls set.
type pace struct {
	ch   chan bool
	fast bool
}

func newPace() *pace { return &pace{ch: make(chan bool, 1), fast: true} }

// set asks for fast (true) or slow polling; a repeated value sends nothing.
func (p *pace) set(fast bool) bool {
	if fast == p.fast {
		return false
	}
	p.fast = fast
	select {
	case <-p.ch: // drop a setting the poller has not taken yet
	default:
	}
	p.ch <- fast
	return true
}

// observation is a poll as the loop consumes it: the drain's view and the
// raw sample for status.
type observation struct {
	started time.Time // when the poll began; obs.At is when it ended
	sample  runtimeapi.Sample
	obs     drain.Observation
	lb      *lbTables // the health check's tables, from the stop on (lbcheck.go)
}

// observe turns a sample into the drain's observation: per worker, the
// activity counters of the counted frontends. Requests: stot (connections)
// for every frontend, plus req_tot for HTTP ones, since keep-alive requests
// open no new session. Connections, what counts once routing is withdrawn:
// stot only for the frontends whose soft stop is graceful (TCP mode, or
// HTTP that the configuration makes graceful), stot + req_tot for the others
// (an HTTP frontend no inspection saw is one; the configuration is inspected
// again after each reload that lands, reinspect.go).
// All only grow within one worker.
//
// A current worker that the master could not reach (Sample.Unreachable) is
// one that still loads its configuration when it never answered before: it
// has served nothing, and is left out. One that answered before makes the
// observation fail: its counters would be missing.
//
// A failed observation is Reloading when the master runs and HAProxy was
// seen reloading within reloadTimeout (reloading.go).
func (p *poller) observe(s runtimeapi.Sample, err error) drain.Observation {
	o := drain.Observation{At: p.now(), Err: err}
	if err == nil {
		p.countReloads(s, o.At)
		err = p.remember(s)
	}
	if err != nil {
		o.Err, o.Reloading = err, p.reloading(o.At)
		return o
	}
	graceful := p.graceful.load()
	o.Reloads, o.Ungraceful = s.Master.Reloads, []string{}
	for _, w := range s.Unreachable {
		o.Loading = append(o.Loading, w.PID) // never answered: remember fails for one that did
	}
	for _, w := range s.Workers {
		dw := drain.Worker{PID: w.Process.PID, Old: finishing(w), Sessions: w.Info.CurrConns,
			Accepted: make(map[string]uint64, len(w.Frontends)), Opened: make(map[string]uint64, len(w.Frontends))}
		for _, f := range w.Frontends {
			if p.ignore[f.Name] {
				continue
			}
			dw.Accepted[f.Name] += f.Stot
			dw.Requests += f.Stot + f.ReqTot
			if f.Mode == "tcp" || graceful[f.Name] {
				dw.Connections += f.Stot
			} else {
				dw.Connections += f.Stot + f.ReqTot
				if !slices.Contains(o.Ungraceful, f.Name) {
					o.Ungraceful = append(o.Ungraceful, f.Name)
				}
			}
			if dw.Opened != nil && f.HasConnTot {
				dw.Opened[f.Name] += f.ConnTot
			} else {
				dw.Opened = nil // a stop line could not be compared
			}
		}
		o.Workers = append(o.Workers, dw)
	}
	slices.Sort(o.Ungraceful)
	return o
}

// countReloads marks a reload seen when the master's reload count moved
// since the last successful sample.
func (p *poller) countReloads(s runtimeapi.Sample, at time.Time) {
	if p.counting && s.Master.Reloads != p.counted {
		p.seen.mark(at)
	}
	p.counted, p.counting = s.Master.Reloads, true
}

// reloading reports whether a poll that failed at at is explained by a
// reload: the master runs and HAProxy was seen reloading within
// reloadTimeout, the longest a reload may take to show its outcome.
func (p *poller) reloading(at time.Time) bool {
	return p.running != nil && p.seen.within(at, reloadTimeout) && p.running()
}

// remember records the workers that answered s, forgetting those show proc
// no longer lists, and fails when a worker that answered before is
// unreachable now.
func (p *poller) remember(s runtimeapi.Sample) error {
	listed := make(map[int]bool, len(s.Workers)+len(s.Skipped)+len(s.Unreachable))
	for _, w := range s.Workers {
		listed[w.Process.PID] = true
	}
	for _, w := range s.Unreachable {
		if p.answered[w.PID] {
			return fmt.Errorf("current worker %d stopped answering the master CLI: its counters cannot be read", w.PID)
		}
		listed[w.PID] = true
	}
	for pid := range p.answered {
		if !listed[pid] {
			delete(p.answered, pid)
		}
	}
	if p.answered == nil {
		p.answered = make(map[int]bool, len(s.Workers))
	}
	for _, w := range s.Workers {
		p.answered[w.Process.PID] = true
	}
	return nil
}

// finishing reports whether w is an old worker finishing its sessions:
// listed under old workers and stopping. One that show proc lists as old
// but that does not stop is the serving worker a failed reload kept
// (HAProxy 3.1+ lists it so; 2.6 and 3.0 keep it current): it is current.
func finishing(w runtimeapi.WorkerSample) bool { return w.Process.Old && w.Info.Stopping }
