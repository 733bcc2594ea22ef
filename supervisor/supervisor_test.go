package supervisor

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hapsuper/hapsuper/conf"
	"github.com/hapsuper/hapsuper/haproxy"
	"github.com/hapsuper/hapsuper/runtimeapi"
)

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

// waitMaster reaps until pid is gone, bounded.
func waitMaster(t *testing.T, pid int) syscall.WaitStatus {
	t.Helper()
	end := time.Now().Add(5 * time.Second)
	for time.Now().Before(end) {
		if ws, done, _ := reapAll(pid, discard); done {
			return ws
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("pid %d not reaped within 5s", pid)
	return 0
}

// A process that ends by a signal is reported as 128+N, as shells and tini do.
func TestExitCodeOfChild(t *testing.T) {
	tests := []struct {
		script string
		want   int
	}{
		{"exit 0", 0},
		{"exit 3", 3},
		{"kill -TERM $$", 128 + 15},
		{"kill -KILL $$", 128 + 9},
		{"kill -INT $$", 128 + 2},
		{"kill -USR1 $$", 128 + 10},
	}
	for _, tt := range tests {
		t.Run(tt.script, func(t *testing.T) {
			pid, err := startMaster("/bin/sh", []string{"sh", "-c", tt.script}, os.Environ(), os.Stderr)
			if err != nil {
				t.Fatal(err)
			}
			if got := exitCode(waitMaster(t, pid)); got != tt.want {
				t.Errorf("exit code of %q = %d, want %d", tt.script, got, tt.want)
			}
		})
	}
}

func TestResolveMapsFailuresToShellCodes(t *testing.T) {
	dir := t.TempDir()
	notExec := filepath.Join(dir, "haproxy")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		bin  string
		want int
	}{
		{filepath.Join(dir, "missing"), ExitNotFound},
		{"no-such-haproxy-binary", ExitNotFound},
		{notExec, ExitNotExecutable},
	}
	for _, tt := range tests {
		_, err := resolve(tt.bin)
		var ee *ExitError
		if !errors.As(err, &ee) || ee.Code != tt.want {
			t.Errorf("resolve(%q) = %v, want exit code %d", tt.bin, err, tt.want)
		}
	}
	if p, err := resolve("sh"); err != nil || !filepath.IsAbs(p) {
		t.Errorf("resolve(sh) = %q, %v; want an absolute path", p, err)
	}
}

type fakeSampler struct {
	s   runtimeapi.Sample
	err error
}

func (f fakeSampler) Sample(context.Context) (runtimeapi.Sample, error) { return f.s, f.err }

// Activity is stot plus req_tot per worker, ignored frontends left out.
// Connections, for withdrawn routing: stot of graceful and TCP frontends,
// stot plus req_tot of the others (web here is not graceful, api is).
func TestPollerObserve(t *testing.T) {
	now := time.Unix(100, 0)
	p := &poller{ignore: map[string]bool{"probes": true}, graceful: newFrontendSet(map[string]bool{"api": true}), now: func() time.Time { return now }}
	s := runtimeapi.Sample{Workers: []runtimeapi.WorkerSample{
		{
			Process: runtimeapi.Process{PID: 7},
			Info:    runtimeapi.Info{CurrConns: 4},
			Frontends: []runtimeapi.Frontend{
				{Name: "web", Mode: "http", Stot: 3, ReqTot: 10},
				{Name: "db", Mode: "tcp", Stot: 5},
				{Name: "probes", Mode: "http", Stot: 1000, ReqTot: 1000},
				{Name: "api", Mode: "http", Stot: 2, ReqTot: 40},
			},
		},
		{Process: runtimeapi.Process{PID: 6, Old: true}, Info: runtimeapi.Info{Stopping: true}, Frontends: []runtimeapi.Frontend{{Name: "web", Mode: "http", Stot: 1, ReqTot: 2}}},
		// Listed old, not stopping: the worker a failed reload kept (3.1+).
		{Process: runtimeapi.Process{PID: 5, Old: true}},
	}}
	o := p.observe(s, nil)
	if o.Err != nil || !o.At.Equal(now) || len(o.Workers) != 3 {
		t.Fatalf("observe = %+v", o)
	}
	if w := o.Workers[0]; w.PID != 7 || w.Requests != 60 || w.Connections != 20 || w.Sessions != 4 || w.Old {
		t.Errorf("current worker = %+v, want pid 7, 60 requests (3+10+5+2+40), 20 connections (3+10+5+2), 4 sessions", w)
	}
	if w := o.Workers[1]; w.PID != 6 || w.Requests != 3 || w.Connections != 3 || !w.Old {
		t.Errorf("old worker = %+v, want pid 6, 3 requests, 3 connections, old", w)
	}
	if w := o.Workers[2]; w.PID != 5 || w.Old {
		t.Errorf("worker listed old that does not stop = %+v, want current (not old)", w)
	}
	// 3.2 lists a worker that still loads its configuration, and the
	// master cannot reach it yet: left out while it never answered, an
	// error once it did.
	loading := runtimeapi.Sample{Workers: s.Workers[:1], Unreachable: []runtimeapi.Process{{PID: 8}}}
	if o := p.observe(loading, nil); o.Err != nil || len(o.Workers) != 1 {
		t.Errorf("a worker still loading = %+v, want no error and the one that answered", o)
	}
	answered := runtimeapi.Sample{Workers: []runtimeapi.WorkerSample{s.Workers[0], {Process: runtimeapi.Process{PID: 8}}}}
	if o := p.observe(answered, nil); o.Err != nil {
		t.Fatal(o.Err)
	}
	if o := p.observe(loading, nil); o.Err == nil || !strings.Contains(o.Err.Error(), "worker 8 stopped answering") {
		t.Errorf("a worker that answered before, unreachable now: err %v, want it named", o.Err)
	}
	failed := p.observe(runtimeapi.Sample{}, errors.New("boom"))
	if failed.Err == nil || len(failed.Workers) != 0 {
		t.Errorf("failed poll = %+v, want the error and no workers", failed)
	}
}

func TestPollerStopsWithContext(t *testing.T) {
	p := &poller{cli: fakeSampler{err: errors.New("no master")}, interval: time.Millisecond, now: time.Now}
	ctx, cancel := context.WithCancel(context.Background())
	out := make(chan observation)
	done := make(chan error, 1)
	go func() { done <- p.run(ctx, out) }()
	select {
	case o := <-out:
		if o.obs.Err == nil {
			t.Error("observation of a failed poll has no error")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no observation within 5s")
	}
	cancel() // the poller is blocked sending its next observation
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("poller did not stop within 5s of cancel")
	}
}

func TestNotifyListener(t *testing.T) {
	nl, err := listenNotify(filepath.Join(t.TempDir(), "notify.sock"))
	if err != nil {
		t.Fatal(err)
	}
	events := make(chan notifyEvent, 4)
	done := make(chan struct{})
	ran := make(chan error, 1)
	go func() { ran <- nl.run(events, done) }()
	c, err := net.Dial("unixgram", nl.path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte("STATUS=starting\nREADY=1\nMAINPID=1\n"))
	c.Write([]byte("RELOADING=1"))
	for _, want := range []notifyEvent{notifyReady, notifyReloading} {
		select {
		case got := <-events:
			if got != want {
				t.Errorf("event %q, want %q", got, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("no %q within 5s", want)
		}
	}
	close(done)
	nl.close()
	select {
	case err := <-ran:
		if err != nil {
			t.Errorf("run after close = %v, want nil", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("run did not return within 5s of close")
	}
}

// A drain's audit expects new connections for the in-flight window in
// kube-proxy mode, and for the quiet period in endpointslices mode, where
// the verdict comes before kube-proxy's rules change.
func TestDrainSettings_AuditWindowByMode(t *testing.T) {
	s := conf.Settings{QuietPeriod: 2 * time.Second, PollInterval: 100 * time.Millisecond, KubeProxySyncAllowance: 250 * time.Millisecond}
	for mode, want := range map[string]time.Duration{conf.RoutingKubeProxy: 450 * time.Millisecond, conf.RoutingEndpointSlices: 2 * time.Second} {
		if got := drainSettings(s, haproxy.Inspection{}, mode).InFlightWindow; got != want {
			t.Errorf("drainSettings in %s mode: audit window %v, want %v", mode, got, want)
		}
	}
	s.QuietPeriod = 300 * time.Millisecond // shorter than the in-flight window
	if got, want := drainSettings(s, haproxy.Inspection{}, conf.RoutingEndpointSlices).InFlightWindow, 450*time.Millisecond; got != want {
		t.Errorf("drainSettings in endpointslices mode, quiet period 300ms: audit window %v, want the in-flight window %v", got, want)
	}
}
