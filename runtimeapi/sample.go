package runtimeapi

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// WorkerSample is one worker's counters from one Sample call.
type WorkerSample struct {
	Process   Process
	Info      Info
	Frontends []Frontend
}

// Sample is one poll of every worker, old ones included.
type Sample struct {
	Master  Process
	Workers []WorkerSample
	// Skipped lists the old workers that show proc listed but that exited
	// (or could no longer be reached) before their counters were read. They
	// are not in Workers.
	Skipped []Process
	// Unreachable lists the current workers that show proc listed but
	// whose CLI the master could not reach ("Can't find the target PID",
	// "Can't connect to the target CLI!"): HAProxy 3.1+ lists a new worker
	// while it still loads its configuration, and it answers only once it
	// serves. They are not in Workers; whether that is a worker that never
	// served or one that stopped answering is the caller's to tell.
	Unreachable []Process
}

// maxWorkersPerLine bounds the workers asked on one command line: the master
// reads a line into one buffer (tune.bufsize, 16 kB by default), and the
// reply must stay under MaxReplySize.
const maxWorkersPerLine = 16

// Sample runs show proc, then one line for all workers, current and old:
// `@!<pid> show info; @!<pid> show stat -1 1 -1; ...` (one more line per 16
// workers). The reply is split at the empty line ending each output.
//
// An old worker that exits after show proc is skipped and recorded in
// Skipped. The master shows that in one of three ways, all measured on 2.6:
// it answers "Can't find the target PID" (the worker is gone), answers
// "Can't connect to the target CLI!" (it is exiting), or closes the
// connection exactly where that worker's output would begin (it is exiting).
// Either way nothing after it on the line runs, so the workers after it are
// asked again on a new line. A current worker the master answers the first
// two for is recorded in Unreachable (3.2 lists a worker that still loads
// its configuration so). A current worker whose reply is cut, an error
// answer, or a reply cut inside an output fails the whole Sample; errors
// name the worker and the command, e.g. "show stat on worker 1234: ...".
func (c *Client) Sample(ctx context.Context) (Sample, error) {
	procs, err := c.ShowProc(ctx)
	if err != nil {
		return Sample{}, err
	}
	s := Sample{Master: procs.Master}
	pending := append(slices.Clone(procs.Current), procs.Old...)
	for len(pending) > 0 {
		got, err := c.sampleWorkers(ctx, pending[:min(len(pending), maxWorkersPerLine)])
		s.Workers = append(s.Workers, got...)
		pending = pending[len(got):]
		if err == nil {
			continue
		}
		switch {
		case len(pending) == 0: // no worker to blame
			return Sample{}, err
		case pending[0].Old && workerGone(err):
			s.Skipped = append(s.Skipped, pending[0])
		case !pending[0].Old && (errors.Is(err, ErrNoSuchProcess) || errors.Is(err, ErrWorkerUnreachable)):
			s.Unreachable = append(s.Unreachable, pending[0])
		default:
			return Sample{}, err
		}
		pending = pending[1:]
	}
	return s, nil
}

// workerGone tells whether err from sampleWorkers says the worker after the
// answered ones is gone or exiting.
func workerGone(err error) bool {
	var closed *closedBetweenError
	return errors.Is(err, ErrNoSuchProcess) || errors.Is(err, ErrWorkerUnreachable) || errors.As(err, &closed)
}

// sampleWorkers asks every worker of batch on one line. It returns the
// samples of the workers answered before any error; an error for which
// workerGone is true is then about batch[len(samples)].
func (c *Client) sampleWorkers(ctx context.Context, batch []Process) ([]WorkerSample, error) {
	cmds := make([]string, 0, 2*len(batch))
	for _, p := range batch {
		cmds = append(cmds, infoCommand(p.PID), statCommand(p.PID))
	}
	reply, err := c.roundTrip(ctx, strings.Join(cmds, "; "))
	if err != nil {
		return nil, fmt.Errorf("sample workers %s: %w", pids(batch), err)
	}
	outputs, splitErr := splitOutputs(reply, len(cmds))
	var samples []WorkerSample
	for i := 0; i+1 < len(outputs); i += 2 {
		p := batch[i/2]
		info, err := parseShowInfo(outputs[i], p.PID)
		if err != nil {
			return samples, fmt.Errorf("show info on worker %d: %w", p.PID, err)
		}
		frontends, err := parseShowStat(outputs[i+1])
		if err != nil {
			return samples, fmt.Errorf("show stat on worker %d: %w", p.PID, err)
		}
		samples = append(samples, WorkerSample{Process: p, Info: info, Frontends: frontends})
	}
	if splitErr == nil {
		return samples, nil
	}
	if len(outputs) == len(cmds) { // every output came, then more data: no worker to blame
		return samples, fmt.Errorf("sample workers %s: %w", pids(batch), splitErr)
	}
	p, command := batch[len(outputs)/2], "show info"
	if len(outputs)%2 == 1 {
		command = "show stat"
	}
	if errors.Is(splitErr, ErrNoSuchProcess) { // the answer names the pid: check it
		if pid, ok := noTargetPID(splitErr); !ok || pid != p.PID {
			return samples, fmt.Errorf("%s on worker %d: answer is about another process: %v", command, p.PID, splitErr)
		}
	}
	return samples, fmt.Errorf("%s on worker %d: %w", command, p.PID, splitErr)
}

// pids formats the pids of procs for errors: "[12 34]".
func pids(procs []Process) string {
	s := make([]string, len(procs))
	for i, p := range procs {
		s[i] = strconv.Itoa(p.PID)
	}
	return "[" + strings.Join(s, " ") + "]"
}
