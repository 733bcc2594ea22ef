// Package supervisor is hapsuper's PID 1: it starts HAProxy in master-worker
// mode, reaps every child, routes signals (the stop signals start a drain and
// are never forwarded; SIGHUP and SIGUSR2 reload; SIGINT and SIGQUIT
// hard-stop; docs/signals.md for the first milliseconds), feeds the drain
// state machine what the master CLI and routing report, carries out its
// actions on the master, and exits with HAProxy's code.
//
// Shutdown budget, from the stop request (grace period G, margin M):
//
//	0 .. bound          draining: listeners open, conditions observed (bound ≤ G−M)
//	bound               soft stop at the latest (SIGUSR1 to the master)
//	G−M                 hard stop (SIGTERM to the master, ~40 ms in HAProxy)
//	G−M+min(M/2, 1s)    SIGKILL to HAProxy's process group if it is still there
//	G                   the kubelet's SIGKILL, which hapsuper never waits for
//
// The package must not decide when to stop: drain/ does. It must not wait on
// a child anywhere but in reapAll.
package supervisor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/oklog/run"

	"github.com/hapsuper/hapsuper/conf"
	"github.com/hapsuper/hapsuper/drain"
	"github.com/hapsuper/hapsuper/haproxy"
	"github.com/hapsuper/hapsuper/metrics"
	"github.com/hapsuper/hapsuper/runtimeapi"
	"github.com/hapsuper/hapsuper/status"
)

// ExitConfig is the exit code of a bad flag or configuration.
const ExitConfig = 2

// cliTimeout bounds one poll of the master CLI (a Sample is 2 round trips).
const cliTimeout = time.Second

// Supervisor runs one HAProxy master for the life of the process.
type Supervisor struct {
	settings    conf.Settings
	log         *slog.Logger
	openRouting OpenRouting    // nil: routing off
	sigs        chan os.Signal // caught since the process started (earlysignal), or nil
	logOut      io.Writer      // hapsuper's log output, for HAProxy's stderr; nil: HAProxy writes to stderr itself
	logJSON     bool           // HAProxy's stderr lines become records of the log
}

// New returns a Supervisor for validated settings. openRouting builds the
// routing observation (routing.Open behind an adapter); nil runs with
// routing off.
func New(s conf.Settings, log *slog.Logger, openRouting OpenRouting) *Supervisor {
	return &Supervisor{settings: s, log: log, openRouting: openRouting}
}

// WithSignals has Run read its signals from sigs, a channel that has been
// catching them since before the settings were read (earlysignal.Caught):
// a stop signal found there when HAProxy is about to start ends hapsuper
// without starting it; one that arrives later starts the drain as usual.
func (sv *Supervisor) WithSignals(sigs chan os.Signal) *Supervisor {
	sv.sigs = sigs
	return sv
}

// WithLogOutput relays HAProxy's stderr into out, hapsuper's own log
// output (one that never blocks): as they are, or, with json, as records
// of hapsuper's logger, so that a JSON log holds nothing else.
func (sv *Supervisor) WithLogOutput(out io.Writer, json bool) *Supervisor {
	sv.logOut, sv.logJSON = out, json
	return sv
}

// Run starts HAProxy and supervises it until the master exits. It returns
// the code the process must exit with; a non-nil error says why it is not 0
// when hapsuper itself failed (config, start).
func (sv *Supervisor) Run(ctx context.Context) (int, error) {
	s := sv.settings
	sigs := sv.sigs
	if sigs == nil {
		sigs = make(chan os.Signal, 32)
	}
	// Never stopped: a stop or reload signal that comes after the loop
	// ended, while the process exits, must not take the default action (a
	// SIGHUP of a reload storm killed hapsuper there with code 129 instead
	// of HAProxy's 0). Such signals fill the buffered channel and are
	// dropped.
	signal.Notify(sigs, watchedSignals(s.StopSignals)...)
	if err := checkMemoryShares(s); err != nil {
		return ExitConfig, err
	}
	lock, err := sv.lockRuntimeDir() // one hapsuper per runtime directory (instancelock.go)
	if err != nil {
		return ExitConfig, err
	}
	defer lock.release()
	path, err := resolve(s.HAProxy[0])
	if err != nil {
		return exitCodeOf(err), err
	}
	companionPath := ""
	if s.Companion != "" {
		if companionPath, err = resolveCompanion(s.Companion); err != nil {
			return exitCodeOf(err), err
		}
	}
	insp, err := sv.prepare()
	if err != nil {
		return ExitConfig, err
	}
	mode, rt := routingOff, Routing(nil)
	if sv.openRouting != nil {
		if mode, rt, err = sv.openRouting(s, sv.log); err != nil {
			return ExitConfig, err
		}
	}
	notify := supportsNotify(ctx, path)

	// From here on, every child is waited for by reapAll only.
	if err := becomeSubreaper(); err != nil {
		sv.log.Warn("cannot become child subreaper: orphans may stay zombies", "err", err)
	}

	board := status.NewBoard(status.Snapshot{Phase: drain.Starting, Settings: statusSettings(s, mode)})
	srv, err := status.Listen(s.StatusSocket, board, sv.log.With("component", "status"))
	if err != nil {
		return ExitConfig, err
	}
	defer srv.Close()
	var actors []func(context.Context) error // run beside the loop, stopped with it
	serveMetrics, err := sv.listenMetrics(board)
	if err != nil {
		return ExitConfig, err
	}
	if serveMetrics != nil {
		actors = append(actors, serveMetrics)
	}

	env := os.Environ()
	var nl *notifyListener
	if notify {
		if nl, err = listenNotify(filepath.Join(filepath.Dir(s.StatusSocket), "notify.sock")); err != nil {
			sv.log.Warn("cannot listen for HAProxy's readiness notifications: polling the master CLI instead", "err", err)
			notify = false
		} else {
			defer nl.close()
			env = append(env, "NOTIFY_SOCKET="+nl.path)
		}
	}
	argv := haproxy.Command(s, notify)
	argv[0] = path
	argv = haproxy.WithMemoryLimit(argv, sv.haproxyMemory(cgroupRoot))
	sv.ownMemoryLimit(cgroupRoot, os.Getenv, debug.SetMemoryLimit)
	if sig, ok := stopBeforeStart(sigs, signalSet(s.StopSignals)); ok {
		sv.log.Info("stop requested before HAProxy started: exiting without starting it", "signal", conf.SignalName(sig))
		return 0, nil
	}
	stderr, relay := os.Stderr, (*stderrRelay)(nil)
	var stopLines chan workerStop // nil without a relay: never ready
	if sv.logOut != nil {
		raw := sv.logOut
		if sv.logJSON {
			raw = nil
		}
		if relay, err = newStderrRelay(raw, sv.log); err != nil {
			sv.log.Warn("cannot relay HAProxy's stderr: it writes to hapsuper's directly", "err", err)
			relay = nil
		} else {
			stderr = relay.w
			stopLines = make(chan workerStop, stopLineBuffer)
			relay.stopLines = stopLines
		}
	}
	master, err := startMaster(path, argv, env, stderr)
	if relay != nil {
		relay.started()
		if err != nil {
			relay.r.Close()
		} else {
			actors = append(actors, func(ctx context.Context) error { return relay.run(ctx.Done()) })
		}
	}
	if err != nil {
		return exitCodeOf(err), err
	}
	sv.log.Info("haproxy started", "pid", master, "argv", argv, "notify", notify)
	var comp *companion
	if companionPath != "" {
		out, tail := os.Stderr, &lineTail{}
		if sv.logOut != nil {
			if cr, err := newCompanionRelay(sv.logOut, sv.logJSON, sv.log); err != nil {
				sv.log.Warn("cannot relay the companion's output: it writes to hapsuper's stderr directly", "err", err)
			} else {
				defer cr.w.Close()
				tail.hook(cr)
				out = cr.w
				actors = append(actors, func(ctx context.Context) error { return cr.run(ctx.Done()) })
			}
		}
		comp = newCompanion(companionPath, s.CompanionArgs, sv.companionEnv(cgroupRoot, shimEnv(withoutEnv(env, "NOTIFY_SOCKET"), s)), out,
			s.CompanionKillDelay, s.CompanionBackoff, s.CompanionBackoffMax, sv.log)
		comp.tail = tail
	}

	log := sv.log.With("component", "supervisor")
	l := &loop{
		log:       log,
		drain:     drain.New(drainSettings(s, insp, mode)),
		board:     board,
		settings:  s,
		graceful:  newFrontendSet(gracefulFrontends(insp)),
		master:    master,
		proc:      masterProcess{pid: master, log: log},
		stops:     signalSet(s.StopSignals),
		now:       time.Now,
		mode:      mode,
		routing:   rt,
		reloads:   newReloads(),
		reloading: &reloadSeen{},
		companion: comp,
		stopLines: stopLines,
		procs:     func() ([]procStat, error) { return listProcs(procRoot) },
		startCheck: func(origin string, now time.Time) (*reloadCheck, error) {
			// The check must not speak on HAProxy's notify socket.
			return startReloadCheck(argv, withoutEnv(env, "NOTIFY_SOCKET"), origin, now)
		},
	}
	asks := make(chan status.ReloadAsk)
	srv.TakeReloads(asks)
	l.asks = asks
	if rt != nil {
		actors = append(actors, rt.Run)
	}
	return l.runGroup(ctx, sigs, srv, nl, actors)
}

// mkdirFix names what to change when a directory of hapsuper's files
// cannot be made for flag: without the permission (a user that is not
// root, with the default paths under /var/run), the three paths elsewhere.
func mkdirFix(err error, flag string) string {
	if errors.Is(err, fs.ErrPermission) {
		return fmt.Sprintf("run as root, make the directory writable for uid %d, or put hapsuper's files in a directory of yours: "+
			"--master-socket, --status-socket and --override-file (HAPSUPER_MASTER_SOCKET, HAPSUPER_STATUS_SOCKET, HAPSUPER_OVERRIDE_FILE), "+
			"as hapsuper demo does in a temporary directory", os.Getuid())
	}
	return "give --" + flag + " a path in a writable directory"
}

// prepare creates the socket directories, the --create-if-missing files and
// the override file, and checks the user's configuration: all before
// HAProxy starts.
func (sv *Supervisor) prepare() (haproxy.Inspection, error) {
	s := sv.settings
	for _, f := range []struct{ flag, path string }{{"master-socket", s.MasterSocket}, {"status-socket", s.StatusSocket}, {"override-file", s.OverrideFile}} {
		if err := os.MkdirAll(filepath.Dir(f.path), 0o700); err != nil {
			return haproxy.Inspection{}, fmt.Errorf("create directory for --%s %s: %w (%s)", f.flag, f.path, err, mkdirFix(err, f.flag))
		}
	}
	// What hapsuper keeps must not be replaceable by another user. The
	// master socket of HAProxy's own -S may live in a directory shared by
	// design (haproxy-ingress's, with its controller): a warning there.
	for _, p := range []string{s.StatusSocket, s.OverrideFile, s.MasterSocket} {
		err := checkPrivateDir(filepath.Dir(p))
		switch {
		case err == nil:
		case p == s.MasterSocket && haproxy.MasterSocketFromCommand(s):
			sv.log.Warn("the master CLI socket's directory is not private: another user of the pod could replace the socket and feed the drain false counters", "socket", p, "err", err)
		default:
			return haproxy.Inspection{}, err
		}
	}
	created, err := createMissing(s.CreateIfMissing)
	for _, p := range created {
		sv.log.Info("created empty file", "path", p)
	}
	if err != nil {
		return haproxy.Inspection{}, err
	}
	files, err := haproxy.ConfigFiles(s)
	if err != nil {
		return haproxy.Inspection{}, err
	}
	insp, err := haproxy.Inspect(files, s)
	switch {
	case errors.Is(err, haproxy.ErrNotInspected): // HAProxy may load it: no frontend known graceful
		sv.log.Warn("configuration not inspected", "err", err)
	case err != nil:
		return haproxy.Inspection{}, err
	}
	binds, err := haproxy.TCPBinds(files)
	switch {
	case errors.Is(err, haproxy.ErrNotInspected): // warned above: no port known, none checked
	case err != nil:
		return haproxy.Inspection{}, err
	}
	if err := haproxy.CheckPortsFree(binds); err != nil {
		return haproxy.Inspection{}, err
	}
	for _, w := range insp.Warnings {
		sv.log.Warn("config warning", "warning", w)
	}
	return insp, haproxy.WriteOverride(s)
}

// runGroup runs the loop with its helpers as one oklog/run group: the loop
// returns when the master is gone, which stops the poller, the status server,
// the notify listener and the other actors (metrics, routing), which must
// return when ctx ends.
func (l *loop) runGroup(ctx context.Context, sigs <-chan os.Signal, srv *status.Server, nl *notifyListener, actors []func(context.Context) error) (int, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	obs := make(chan observation, 1)
	events := make(chan notifyEvent, 8)
	var code int
	var g run.Group
	g.Add(func() error {
		code = l.run(ctx, sigs, obs, events)
		return nil
	}, func(error) { cancel() })
	l.pace = newPace()
	cli := runtimeapi.New(l.settings.MasterSocket, cliTimeout)
	p := &poller{
		cli:      cli,
		interval: l.settings.PollInterval,
		serving:  servingPollInterval,
		pace:     l.pace.ch,
		ignore:   set(l.settings.IgnoreFrontends),
		graceful: l.graceful,
		now:      time.Now,
		running:  func() bool { return processRunning(l.master) },
		seen:     l.reloading,
	}
	if l.settings.LBCheckBind != "" {
		// The health check hapsuper adds is no traffic; its own checks
		// are counted in its table.
		p.ignore[haproxy.LBCheck] = true
		p.lb = &lbCheckIO{cli: cli}
		l.lbIO, l.lbCheck = p.lb, &lbCheck{bind: l.settings.LBCheckBind, threshold: l.settings.LBCheckThreshold}
	}
	g.Add(func() error { return p.run(ctx, obs) }, func(error) { cancel() })
	g.Add(srv.Serve, func(error) { srv.Close() })
	for _, a := range actors {
		g.Add(func() error { return a(ctx) }, func(error) { cancel() })
	}
	if nl != nil {
		done := make(chan struct{})
		g.Add(func() error { return nl.run(events, done) }, func(error) { close(done); nl.close() })
	}
	if err := g.Run(); err != nil {
		return code, err
	}
	return code, nil
}

// listenMetrics takes the metrics port now, so that a port in use fails
// hapsuper before HAProxy starts, and returns the group actor that serves it
// until its context ends; nil when --metrics-addr is empty. A failure of the
// endpoint is logged and never ends the group: it must not stop HAProxy.
func (sv *Supervisor) listenMetrics(board *status.Board) (func(context.Context) error, error) {
	if sv.settings.MetricsAddr == "" {
		return nil, nil
	}
	ln, err := metrics.Listen(sv.settings.MetricsAddr)
	if err != nil {
		return nil, err
	}
	log := sv.log.With("component", "metrics")
	return func(ctx context.Context) error {
		if err := metrics.Serve(ctx, ln, board, log); err != nil {
			log.Error("metrics endpoint stopped: scrapes fail until hapsuper restarts", "err", err)
			<-ctx.Done()
		}
		return nil
	}, nil
}

func exitCodeOf(err error) int {
	var ee *ExitError
	if errors.As(err, &ee) {
		return ee.Code
	}
	return ExitConfig
}

func watchedSignals(stops []syscall.Signal) []os.Signal {
	out := []os.Signal{syscall.SIGCHLD, syscall.SIGHUP, syscall.SIGUSR2, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGTERM, syscall.SIGUSR1}
	for _, s := range stops {
		out = append(out, s)
	}
	return out
}

// stopBeforeStart takes the signals that arrived before HAProxy started and
// returns the first that would have stopped it: a stop signal, or one that
// stops HAProxy at once (SIGINT, SIGQUIT, SIGTERM or SIGUSR1 when they are
// not stop signals). A reload (SIGHUP, SIGUSR2) is moot, HAProxy reads its
// configuration as it starts, and a SIGCHLD is no child of the loop's yet.
func stopBeforeStart(sigs <-chan os.Signal, stops map[syscall.Signal]bool) (syscall.Signal, bool) {
	for {
		select {
		case sig := <-sigs:
			s := sig.(syscall.Signal)
			if stops[s] || s == syscall.SIGINT || s == syscall.SIGQUIT || s == syscall.SIGTERM || s == syscall.SIGUSR1 {
				return s, true
			}
		default:
			return 0, false
		}
	}
}

func signalSet(sigs []syscall.Signal) map[syscall.Signal]bool {
	m := make(map[syscall.Signal]bool, len(sigs))
	for _, s := range sigs {
		m[s] = true
	}
	return m
}

func set(names []string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

func drainSettings(s conf.Settings, insp haproxy.Inspection, mode string) drain.Settings {
	ds := drain.Settings{
		QuietPeriod:          s.QuietPeriod,
		WithdrawnQuietPeriod: s.WithdrawnQuiet(mode),
		MaxWait:              s.MaxWait,
		GracePeriod:          s.GracePeriod,
		Margin:               s.Margin,
		InFlightWindow:       auditWindow(s, mode),
		InFlightAllowance:    s.InFlightAllowance(),
		PollInterval:         s.PollInterval,
	}
	if s.Companion != "" {
		// The companion's stop comes between the drain's end and the soft
		// stop: its kill delay is taken from the drain's share, so that the
		// soft stop still comes by --max-wait (conf checks what is left).
		ds.MaxWait -= s.CompanionKillDelay
	}
	ignored := set(s.IgnoreFrontends)
	for _, fe := range insp.Frontends {
		if !fe.Graceful && !ignored[fe.Name] {
			ds.UngracefulFrontends = append(ds.UngracefulFrontends, fe.Name)
		}
	}
	return ds
}

// auditWindow is how long after a withdrawn verdict the self-audit expects
// new connections in the routing mode the drain runs in (auto resolved). In
// kube-proxy mode every node's rules are confirmed before the verdict: the
// in-flight window. In every other mode the verdict comes from the API
// before the nodes' rules change (kube-proxy syncs at most once per
// minSyncPeriod, 1 s by default), and the connections their lag still
// sends are expected for as long as the quiet period, which covers that
// lag (conf.Settings.WithdrawnQuiet): counting them as late would call
// every drain in endpointslices mode unverified.
func auditWindow(s conf.Settings, mode string) time.Duration {
	if mode == conf.RoutingKubeProxy {
		return s.InFlightWindow()
	}
	return max(s.InFlightWindow(), s.QuietPeriod)
}

// gracefulFrontends is the set of frontends whose soft stop is graceful.
func gracefulFrontends(insp haproxy.Inspection) map[string]bool {
	m := make(map[string]bool, len(insp.Frontends))
	for _, fe := range insp.Frontends {
		if fe.Graceful {
			m[fe.Name] = true
		}
	}
	return m
}

func statusSettings(s conf.Settings, mode string) status.Settings {
	return status.Settings{
		GracePeriod:          status.Duration(s.GracePeriod),
		QuietPeriod:          status.Duration(s.QuietPeriod),
		WithdrawnQuietPeriod: status.Duration(s.WithdrawnQuiet(mode)),
		MaxWait:              status.Duration(s.MaxWait),
		Margin:               status.Duration(s.Margin),
		PollInterval:         status.Duration(s.PollInterval),
		Routing:              mode,
	}
}
