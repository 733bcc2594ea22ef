package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/hapsuper/hapsuper/conf"
	"github.com/hapsuper/hapsuper/routing"
	"github.com/hapsuper/hapsuper/sidecar"
	"github.com/hapsuper/hapsuper/supervisor"
	"github.com/hapsuper/hapsuper/supervisor/earlysignal"
)

// DefaultGateSocket is --gate-socket's default, beside the master CLI's
// default path: the volume both containers mount.
const DefaultGateSocket = "/var/run/hapsuper/gate.sock"

// notInSidecar are run's flags about the HAProxy process hapsuper starts,
// which the sidecar does not: a command line that sets one is refused.
var notInSidecar = []string{"override-file", "create-if-missing", "haproxy-memory-share", "haproxy-command", "stop-signals",
	"lb-check-bind", "lb-check-threshold", "companion", "companion-kill-delay", "companion-restart-backoff",
	"companion-restart-backoff-max", "companion-memory-share"}

const sidecarAbout = "Runs beside an HAProxy container it does not start, as a native sidecar (an init container\n" +
	"with restartPolicy: Always). It reads HAProxy's master CLI at --master-socket on a volume both\n" +
	"containers mount (waiting for it as long as it takes), watches the pod and its routing as run\n" +
	"does, and serves a gate for the HAProxy container's preStop hook: asked while the pod is being\n" +
	"deleted, it answers once the drain ended (routed away and quiet, or the bound), so that the\n" +
	"kubelet's stop signal soft-stops HAProxy only then; asked otherwise (a liveness restart), at\n" +
	"once. It exits once HAProxy is gone. docs/sidecar.md shows the pod spec."

const gateAbout = "Asks the gate of a hapsuper sidecar and prints its answer: a preStop hook's command. It\n" +
	"returns when the gate answers (at once, or once the drain ended) and exits 0; 1 when no\n" +
	"sidecar answers, which the kubelet reports as a FailedPreStopHook Event before it stops the\n" +
	"container anyway."

// gateFlags binds the sidecar's own flags to c.
func gateFlags(fs *flag.FlagSet, c *sidecar.Config) {
	fs.StringVar(&c.GateSocket, "gate-socket", DefaultGateSocket, "the gate's unix socket, for an exec preStop hook (hapsuper gate, or socat -u UNIX-CONNECT:<path> -), on the volume the HAProxy container mounts; empty: none")
	fs.StringVar(&c.GateAddr, "gate-addr", "", "the HTTP gate's address, such as :8406, for an httpGet preStop hook on path "+sidecar.GatePath+" (default: none)")
	fs.StringVar(&c.S6Service, "s6-service", "", "HAProxy's s6 service directory on a volume both containers mount (/run/service/haproxy in HAProxy Technologies' s6-overlay images, whose stop signal hard-stops HAProxy): at the drain's end the sidecar soft-stops HAProxy through s6 (s6-svc -O -1) and answers the gate once HAProxy is gone (default: none)")
}

// sidecarFlags are the sidecar command's flags: run's that concern it and
// the gate's.
func sidecarFlags() []conf.Flag {
	var out []conf.Flag
	for _, f := range conf.RunFlags() {
		if !slices.Contains(notInSidecar, f.Name) {
			out = append(out, f)
		}
	}
	fs := flag.NewFlagSet("hapsuper sidecar", flag.ContinueOnError)
	gateFlags(fs, &sidecar.Config{})
	for _, f := range conf.Describe(fs, conf.EnvName) {
		f.Group = "the gate"
		out = append(out, f)
	}
	return out
}

// sidecarCommand parses the sidecar's flags and runs it.
func sidecarCommand(args []string, stdout, stderr io.Writer) int {
	var c sidecar.Config
	var fs *flag.FlagSet
	s, err := conf.ParseWith(args, os.LookupEnv, func(f *flag.FlagSet) { fs = f; gateFlags(f, &c) })
	var usage *conf.UsageError
	switch {
	case errors.Is(err, flag.ErrHelp):
		cmd, _ := lookupCommand("sidecar")
		writeHelp(stdout, cmd)
		return 0
	case errors.As(err, &usage):
		return usageFailed(stderr, "sidecar", err)
	case err != nil:
		fmt.Fprintf(stderr, "hapsuper: %v\n", err)
		return supervisor.ExitConfig
	}
	if !slices.Equal(s.HAProxy, conf.DefaultHAProxy) {
		return usageFailed(stderr, "sidecar", errors.New("sidecar: HAProxy runs in its own container: drop the command after --"))
	}
	var refused []string
	fs.Visit(func(f *flag.Flag) {
		if slices.Contains(notInSidecar, f.Name) {
			refused = append(refused, "--"+f.Name)
		}
	})
	if len(refused) > 0 {
		return usageFailed(stderr, "sidecar", fmt.Errorf("sidecar: %s concern(s) the HAProxy hapsuper run starts; the sidecar starts none: drop it", strings.Join(refused, ", ")))
	}
	c.Settings = s
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	sink := newLogSink(stderr)
	defer sink.Close()
	log := newLogger(sink, s.LogFormat, s.LogLevel)
	log.Info("hapsuper sidecar starting", "version", versionString(),
		"grace-period", s.GracePeriod.String(), "max-wait", s.MaxWait.String(), "quiet-period", s.QuietPeriod.String(),
		"routing", s.Routing, "master-socket", s.MasterSocket)
	code, err := sidecar.Run(context.Background(), c, log, openSidecarRouting, earlysignal.Caught())
	if err != nil {
		log.Error("hapsuper sidecar failed", "err", err, "code", code)
	}
	return code
}

// openSidecarRouting is routing.Open as the sidecar takes it.
func openSidecarRouting(s conf.Settings, log *slog.Logger) (string, sidecar.Routing, error) {
	mode, c, err := openCluster(s, log)
	if c == nil {
		return mode, nil, err
	}
	return mode, c, nil
}

var _ sidecar.Routing = (*routing.Cluster)(nil)

// gateCommandFlags are the gate command's settings.
type gateCommandFlags struct {
	socket  string
	timeout time.Duration
}

func newGateFlags(f *gateCommandFlags) *flag.FlagSet {
	fs := flag.NewFlagSet("hapsuper gate", flag.ContinueOnError)
	fs.StringVar(&f.socket, "gate-socket", envOr(conf.EnvName("gate-socket"), DefaultGateSocket), "the sidecar's --gate-socket")
	fs.DurationVar(&f.timeout, "timeout", 10*time.Minute, "longest wait for the answer (the kubelet's grace period bounds a hook anyway)")
	return fs
}

func describeGateFlags() []conf.Flag {
	return conf.Describe(newGateFlags(&gateCommandFlags{}), func(name string) string {
		if name == "gate-socket" {
			return conf.EnvName("gate-socket")
		}
		return ""
	})
}

// gateCommand asks the sidecar's gate and prints the answer.
func gateCommand(args []string, stdout, stderr io.Writer) int {
	var f gateCommandFlags
	fs := newGateFlags(&f)
	if code, done := parseCommandFlags("gate", fs, args, stdout, stderr); done {
		return code
	}
	if fs.NArg() > 0 {
		return usageFailed(stderr, "gate", fmt.Errorf("gate: unexpected argument %q", fs.Arg(0)))
	}
	conn, err := net.DialTimeout("unix", f.socket, time.Second)
	if err != nil {
		fmt.Fprintf(stderr, "hapsuper gate: no sidecar answers on %s: %v (is the hapsuper sidecar running, and does this container mount its volume?)\n", f.socket, err)
		return 1
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(f.timeout))
	b, err := io.ReadAll(io.LimitReader(conn, 4<<10))
	switch {
	case err != nil:
		fmt.Fprintf(stderr, "hapsuper gate: no answer from %s: %v\n", f.socket, err)
		return 1
	case len(b) == 0:
		fmt.Fprintf(stderr, "hapsuper gate: the sidecar on %s closed the gate without an answer: it stopped or crashed\n", f.socket)
		return 1
	}
	stdout.Write(b)
	return 0
}
