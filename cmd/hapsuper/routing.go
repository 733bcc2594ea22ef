package main

import (
	"log/slog"

	"github.com/hapsuper/hapsuper/conf"
	"github.com/hapsuper/hapsuper/routing"
	"github.com/hapsuper/hapsuper/supervisor"
)

// openCluster is routing.Open with its mode: a nil Cluster where nothing
// is observed, which each caller returns as its own nil interface (a nil
// *Cluster in an interface would not be nil).
func openCluster(s conf.Settings, log *slog.Logger) (string, *routing.Cluster, error) {
	c, err := routing.Open(s, log)
	if err != nil {
		return "", nil, err
	}
	if !c.Observed() {
		return string(c.Mode()), nil, nil
	}
	return string(c.Mode()), c, nil
}

// openRouting is routing.Open as the supervisor takes it: the supervisor
// knows routing only by its interface, and links no Kubernetes client.
func openRouting(s conf.Settings, log *slog.Logger) (string, supervisor.Routing, error) {
	mode, c, err := openCluster(s, log)
	if c == nil {
		return mode, nil, err
	}
	return mode, c, nil
}

var _ supervisor.Routing = (*routing.Cluster)(nil)
