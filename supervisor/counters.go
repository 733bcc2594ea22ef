package supervisor

import (
	"context"
	"time"

	"github.com/hapsuper/hapsuper/conf"
	"github.com/hapsuper/hapsuper/drain"
	"github.com/hapsuper/hapsuper/haproxy"
	"github.com/hapsuper/hapsuper/runtimeapi"
	"github.com/hapsuper/hapsuper/status"
)

// Counters reads HAProxy's counters over a master CLI that hapsuper did not
// start (hapsuper sidecar): the poller PID 1 runs, old workers included,
// turned into the drain's observations the same way. What it cannot know
// without the master's process and configuration: whether a failed poll is
// a reload (never judged so), and which HTTP frontends soft-stop
// gracefully (none assumed: their requests count as connections).
type Counters struct {
	p    *poller
	pace *pace
}

// Reading is one poll: when it began, the raw sample for status, and the
// drain's observation.
type Reading struct {
	Started     time.Time
	Sample      runtimeapi.Sample
	Observation drain.Observation
}

// NewCounters polls the master CLI at socket every interval while fast
// (the default), every ServingPollInterval while slow; the frontends in
// ignore do not count.
func NewCounters(socket string, interval time.Duration, ignore []string) *Counters {
	pc := newPace()
	return &Counters{
		pace: pc,
		p: &poller{
			cli:      runtimeapi.New(socket, cliTimeout),
			interval: interval,
			serving:  servingPollInterval,
			pace:     pc.ch,
			ignore:   set(ignore),
			now:      time.Now,
			seen:     &reloadSeen{},
		},
	}
}

// SetFast asks for polls every interval (true) or every
// ServingPollInterval; one goroutine only, the one that reads Run's output.
func (c *Counters) SetFast(fast bool) { c.pace.set(fast) }

// Run polls until ctx ends, handing every reading to out.
func (c *Counters) Run(ctx context.Context, out chan<- Reading) error {
	obs := make(chan observation)
	done := make(chan error, 1)
	go func() { done <- c.p.run(ctx, obs) }()
	for {
		select {
		case o := <-obs:
			select {
			case out <- Reading{Started: o.started, Sample: o.sample, Observation: o.obs}:
			case <-ctx.Done():
			}
		case err := <-done:
			return err
		}
	}
}

// DrainSettings are the drain's timings for settings s in routing mode
// mode, as PID 1 mode sets them, for a drain whose HAProxy configuration
// hapsuper does not read (no frontend known to soft-stop gracefully).
func DrainSettings(s conf.Settings, mode string) drain.Settings {
	return drainSettings(s, haproxy.Inspection{}, mode)
}

// Snapshot is the status of a drain of an HAProxy that hapsuper did not
// start, as PID 1 mode publishes it: masterPID is the master the last
// reading listed (0 before any), last the last reading.
func Snapshot(st drain.Status, s conf.Settings, mode string, masterPID int, last Reading) status.Snapshot {
	snap := status.Snapshot{
		Phase:     st.Phase,
		MasterPID: masterPID,
		Drain:     statusDrain(st, nil),
		Settings:  statusSettings(s, mode),
		Workers:   []status.Worker{},
	}
	if last.Observation.Err != nil {
		snap.PollError = last.Observation.Err.Error()
	} else if !last.Observation.At.IsZero() {
		snap.ObservedAt = last.Observation.At
	}
	for _, w := range st.Workers {
		snap.Workers = append(snap.Workers, status.Worker{PID: w.PID, Old: w.Old, Sessions: w.Sessions, Requests: w.Requests, Connections: w.Connections})
	}
	return snap
}
