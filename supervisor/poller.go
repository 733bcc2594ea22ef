package supervisor

import (
	"context"
	"time"

	"github.com/hapsuper/hapsuper/drain"
	"github.com/hapsuper/hapsuper/runtimeapi"
)

// sampler is what the poller needs of the master CLI.
type sampler interface {
	Sample(ctx context.Context) (runtimeapi.Sample, error)
}

// poller reads HAProxy's counters every interval and hands each result to
// the loop. It never decides anything: a failed poll is an observation too.
type poller struct {
	cli      sampler
	interval time.Duration
	ignore   map[string]bool // frontends whose traffic does not count
	graceful map[string]bool // HTTP frontends whose soft stop is graceful (conf.Frontend.Graceful)
	now      func() time.Time
}

// run polls until ctx ends. Each poll is bounded by the client's timeout.
func (p *poller) run(ctx context.Context, out chan<- observation) error {
	tick := time.NewTicker(p.interval)
	defer tick.Stop()
	for {
		started := p.now()
		s, err := p.cli.Sample(ctx)
		o := observation{started: started, sample: s, obs: p.observe(s, err)}
		select {
		case out <- o:
		case <-ctx.Done():
			return nil
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return nil
		}
	}
}

// observation is a poll as the loop consumes it: the drain's view and the
// raw sample for status.
type observation struct {
	started time.Time // when the poll began; obs.At is when it ended
	sample  runtimeapi.Sample
	obs     drain.Observation
}

// observe turns a sample into the drain's observation: per worker, the
// activity counters of the counted frontends. Requests: stot (connections)
// for every frontend, plus req_tot for HTTP ones, since keep-alive requests
// open no new session. Connections, what counts once routing is withdrawn:
// stot only for the frontends whose soft stop is graceful (TCP mode, or
// HTTP that the configuration makes graceful), stot + req_tot for the others
// (an HTTP frontend the inspection did not see, added by a reload, is one).
// All only grow within one worker.
func (p *poller) observe(s runtimeapi.Sample, err error) drain.Observation {
	o := drain.Observation{At: p.now(), Err: err}
	if err != nil {
		return o
	}
	for _, w := range s.Workers {
		dw := drain.Worker{PID: w.Process.PID, Old: w.Process.Old, Sessions: w.Info.CurrConns}
		for _, f := range w.Frontends {
			if p.ignore[f.Name] {
				continue
			}
			dw.Requests += f.Stot + f.ReqTot
			if f.Mode == "tcp" || p.graceful[f.Name] {
				dw.Connections += f.Stot
			} else {
				dw.Connections += f.Stot + f.ReqTot
			}
		}
		o.Workers = append(o.Workers, dw)
	}
	return o
}
