package main

import (
	"log/slog"

	"github.com/hapsuper/hapsuper/conf"
	"github.com/hapsuper/hapsuper/routing"
	"github.com/hapsuper/hapsuper/supervisor"
)

// openRouting is routing.Open as the supervisor takes it: the supervisor
// knows routing only by its interface, and links no Kubernetes client.
func openRouting(s conf.Settings, log *slog.Logger) (string, supervisor.Routing, error) {
	c, err := routing.Open(s, log)
	if err != nil {
		return "", nil, err
	}
	if !c.Observed() {
		return string(c.Mode()), nil, nil
	}
	return string(c.Mode()), c, nil
}

var _ supervisor.Routing = (*routing.Cluster)(nil)
