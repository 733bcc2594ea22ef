package supervisor

import (
	"context"
	"log/slog"
	"time"

	"github.com/hapsuper/hapsuper/conf"
	"github.com/hapsuper/hapsuper/drain"
)

// Routing is what the supervisor needs of the routing observation, which
// routing/ builds (routing.Cluster): the verdict, the pod's grace period,
// the drain's end to announce, and Run, which watches until its context
// ends. Every call but Run comes from the loop and must not block.
type Routing interface {
	Routing(now time.Time) drain.Routing
	StopRequested(now time.Time)
	PodGracePeriod() (time.Duration, bool)
	DrainEnded(st drain.Status)
	Run(ctx context.Context) error
}

// OpenRouting builds the routing observation for the settings before
// HAProxy starts: mode is what status reports; r is nil when nothing is
// observed. An error stops hapsuper with ExitConfig.
type OpenRouting func(s conf.Settings, log *slog.Logger) (mode string, r Routing, err error)

// routingOff is the mode reported when no OpenRouting is given.
const routingOff = conf.RoutingOff
