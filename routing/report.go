package routing

import (
	"time"

	"github.com/hapsuper/hapsuper/drain"
	"github.com/hapsuper/hapsuper/routing/judge"
)

// Routing is the verdict at now, judged (judge.Judge) from what the
// watches and polls left: the rules live in judge/, which does no I/O. It
// is recomputed at every call from the latest state: withdrawal is not
// monotonic (kube-proxy puts a serving-terminating endpoint back when the
// last ready one goes). It carries judge's conditions, typed: their
// detail is rendered, bounded, where it is shown.
func (o *Observer) Routing(now time.Time) drain.Routing {
	if o.cfg.Mode == ModeOff {
		return drain.RoutingObservationOff()
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	f := o.facts()
	return judge.Judge(&f, now).Routing()
}

// facts is the observer's state as the judgement reads it. Called with
// o.mu held; the maps are shared, not copied.
func (o *Observer) facts() judge.Facts {
	return judge.Facts{
		Settings:     o.judging,
		Synced:       o.synced,
		WatchErr:     o.watch.watchErr,
		StopAt:       o.stopAt,
		PodSeen:      o.watch.podSeen,
		PodPaths:     o.watch.podPaths,
		HostIP:       o.watch.hostIP,
		Paths:        o.watch.paths,
		Services:     o.watch.services,
		Unproxied:    o.watch.unproxied,
		Nodes:        o.nodes,
		NodesErr:     o.nodesErr,
		LeftNodes:    o.leftNodes,
		LBNodeChecks: o.lbNodeChecks,
	}
}
