package sidecar

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/oklog/run"

	"github.com/hapsuper/hapsuper/conf"
	"github.com/hapsuper/hapsuper/drain"
	"github.com/hapsuper/hapsuper/metrics"
	"github.com/hapsuper/hapsuper/status"
	"github.com/hapsuper/hapsuper/supervisor"
)

// Config is the sidecar's settings: run's (the drain, routing, the master
// CLI's path, status, metrics, logs) and the gate's two addresses.
type Config struct {
	Settings   conf.Settings
	GateSocket string // the gate's unix socket, on the shared volume; empty: none
	GateAddr   string // the HTTP gate's address; empty: none
	S6Service  string // HAProxy's s6 service directory, soft-stopped through it at the drain's end; empty: none
}

// Routing is what the sidecar needs of routing/: PID 1 mode's interface and
// a read of the pod that does not wait for the watch.
type Routing interface {
	supervisor.Routing
	PodDeleting(ctx context.Context) (deleting bool, grace time.Duration, err error)
}

// OpenRouting builds the routing observation (routing.Open behind an
// adapter): mode is what status reports, r is nil when nothing is observed.
type OpenRouting func(s conf.Settings, log *slog.Logger) (mode string, r Routing, err error)

// readHeaderTimeout bounds an HTTP gate request's headers; nothing bounds
// its answer but the drain.
const readHeaderTimeout = 5 * time.Second

// Run serves the gate and watches the drain until HAProxy is gone after a
// deletion or a stop signal comes from sigs. It never fails for HAProxy's
// absence: it waits for the master CLI. It returns the exit code; an error
// says why hapsuper itself could not run (ExitConfig).
func Run(ctx context.Context, cfg Config, log *slog.Logger, open OpenRouting, sigs <-chan os.Signal) (int, error) {
	s := cfg.Settings
	if cfg.GateSocket == "" && cfg.GateAddr == "" {
		return supervisor.ExitConfig, fmt.Errorf("no gate to serve: give --gate-socket (an exec hook) or --gate-addr (an httpGet hook), or both")
	}
	mode, rt := conf.RoutingOff, Routing(nil)
	if open != nil {
		var err error
		if mode, rt, err = open(s, log); err != nil {
			return supervisor.ExitConfig, err
		}
	}
	if rt == nil {
		log.Warn("routing observation off: every gate request counts as the pod's stop (a liveness restart waits for quiet too); grant the pod's get/watch for a gate that tells them apart")
	}
	if err := os.MkdirAll(filepath.Dir(s.StatusSocket), 0o700); err != nil {
		return supervisor.ExitConfig, fmt.Errorf("create directory for --status-socket %s: %w", s.StatusSocket, err)
	}
	board := status.NewBoard(status.Snapshot{Phase: drain.Starting, Settings: supervisor.Snapshot(drain.Status{}, s, mode, 0, supervisor.Reading{}).Settings})
	srv, err := status.Listen(s.StatusSocket, board, log.With("component", "status"))
	if err != nil {
		return supervisor.ExitConfig, err
	}
	defer srv.Close()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	asks, deleted, done := make(chan ask), make(chan deletion), make(chan struct{})
	g := &gate{asks: asks, deleted: deleted, done: done, slots: make(chan struct{}, maxHeld), webSlots: make(chan struct{}, maxHeld), now: time.Now, log: log.With("component", "gate")}
	if rt != nil {
		g.readPod = rt.PodDeleting
	}
	if cfg.GateSocket != "" {
		if g.unix, err = listenUnix(cfg.GateSocket); err != nil {
			return supervisor.ExitConfig, err
		}
		g.unixPath = cfg.GateSocket
	}
	if cfg.GateAddr != "" {
		if g.httpLn, err = net.Listen("tcp", cfg.GateAddr); err != nil {
			g.close()
			return supervisor.ExitConfig, fmt.Errorf("listen for the gate on --gate-addr %s: %w: free the port or change --gate-addr", cfg.GateAddr, err)
		}
		g.http = &http.Server{Handler: g.handler(), ReadHeaderTimeout: readHeaderTimeout}
	}
	log.Info("gate open for requests", "socket", cfg.GateSocket, "addr", cfg.GateAddr, "master-socket", s.MasterSocket, "routing", mode)

	counters := supervisor.NewCounters(s.MasterSocket, s.PollInterval, s.IgnoreFrontends)
	counters.SetFast(false)
	readings := make(chan supervisor.Reading)
	l := &loop{
		log:      log.With("component", "sidecar"),
		drain:    drain.New(supervisor.DrainSettings(s, mode)),
		settings: s,
		mode:     mode,
		publish:  board.Publish,
		fast:     counters.SetFast,
		now:      time.Now,
	}
	if rt != nil {
		l.routing = rt
	}
	if cfg.S6Service != "" {
		l.s6SoftStop = s6Control(cfg.S6Service)
	}
	code := 0
	var grp run.Group
	grp.Add(func() error {
		defer close(done)
		code = l.run(ctx, readings, asks, deleted, sigs)
		return nil
	}, func(error) { cancel() })
	grp.Add(func() error { return counters.Run(ctx, readings) }, func(error) { cancel() })
	grp.Add(srv.Serve, func(error) { srv.Close() })
	if g.unix != nil {
		grp.Add(g.serveUnix, func(error) { g.unix.Close() })
	}
	if g.http != nil {
		grp.Add(g.serveHTTP, func(error) { g.close() })
	}
	if rt != nil {
		grp.Add(func() error { return rt.Run(ctx) }, func(error) { cancel() })
	}
	if s.MetricsAddr != "" {
		ln, err := metrics.Listen(s.MetricsAddr)
		if err != nil {
			g.close()
			return supervisor.ExitConfig, err
		}
		mlog := log.With("component", "metrics")
		grp.Add(func() error {
			if err := metrics.Serve(ctx, ln, board, mlog); err != nil {
				mlog.Error("metrics endpoint stopped: scrapes fail until hapsuper restarts", "err", err)
				<-ctx.Done() // it must not end the gate
			}
			return nil
		}, func(error) { cancel() })
	}
	err = grp.Run()
	return code, err
}
