package supervisor

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hapsuper/hapsuper/haproxy"
	"github.com/hapsuper/hapsuper/runtimeapi"
	"github.com/hapsuper/hapsuper/status"
)

// haproxy-ingress starts HAProxy on a configuration without frontends and
// writes its own later: the warnings of the configuration a reload loaded
// are logged then, once per change of what they say.
func TestReinspect_WarnsAfterReload(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "haproxy.cfg")
	write := func(text string) {
		t.Helper()
		if err := os.WriteFile(cfg, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var out bytes.Buffer
	s := testSettings
	s.HAProxy = []string{"haproxy", "-W", "-f", cfg}
	l := &loop{log: slog.New(slog.NewTextHandler(&out, nil)), settings: s, reloads: newReloads()}
	t.Cleanup(func() { l.inspector.stop() })
	count := func() int { return strings.Count(out.String(), "config warning") }
	reloaded := func() { landReload(t, l) }

	const front = "frontend _front_http\n    mode http\n    bind :80\n"
	write("defaults\n    timeout client 1s\n") // the controller's --init configuration
	reloaded()
	if n := count(); n != 0 {
		t.Fatalf("no frontend, %d warnings:\n%s", n, &out)
	}
	write("defaults\n    mode http\n    timeout client 10s\n" + front)
	reloaded()
	if n := count(); n != 2 || !strings.Contains(out.String(), "idle-close-on-response") || !strings.Contains(out.String(), "client-fin") || !strings.Contains(out.String(), "after=reload") {
		t.Fatalf("after the reload to a frontend without idle-close-on-response and client-fin: %d warnings, want both:\n%s", n, &out)
	}
	reloaded()
	if n := count(); n != 2 {
		t.Errorf("the same configuration again: %d warnings in all, want the 2 already logged", n)
	}
	write("defaults\n    mode http\n    timeout client 10s\n    timeout client-fin 5s\n    option idle-close-on-response\n" + front)
	reloaded()
	write("defaults\n    mode http\n    timeout client 10s\n    timeout client-fin 5s\n" + front)
	reloaded()
	if n := count(); n != 3 {
		t.Errorf("fixed, then idle-close-on-response dropped again: %d warnings in all, want 3:\n%s", n, &out)
	}
	os.Remove(cfg)
	reloaded()
	if !strings.Contains(out.String(), "configuration after the reload not inspected") {
		t.Errorf("a configuration that cannot be read is not reported:\n%s", &out)
	}
}

// A frontend the controller writes with a reload and makes graceful
// (option idle-close-on-response) counts, once routing is withdrawn, by its
// new connections only, as one start saw; the poller learns it from the
// reload's inspection, and a configuration that drops the option again
// makes its kept-alive requests count again.
func TestReinspect_GracefulFrontendsFollowTheReload(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "haproxy.cfg")
	write := func(text string) {
		t.Helper()
		if err := os.WriteFile(cfg, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s := testSettings
	s.HAProxy = []string{"haproxy", "-W", "-f", cfg}
	var out bytes.Buffer
	l := &loop{log: slog.New(slog.NewTextHandler(&out, nil)), settings: s, reloads: newReloads(), graceful: newFrontendSet(nil)}
	t.Cleanup(func() { l.inspector.stop() })
	p := &poller{graceful: l.graceful, now: time.Now}
	reloaded := func() { landReload(t, l) }
	sample := runtimeapi.Sample{Workers: []runtimeapi.WorkerSample{{
		Process:   runtimeapi.Process{PID: 7},
		Frontends: []runtimeapi.Frontend{{Name: "_front_http", Mode: "http", Stot: 3, ReqTot: 40}},
	}}}
	connections := func() uint64 {
		t.Helper()
		o := p.observe(sample, nil)
		if o.Err != nil || len(o.Workers) != 1 {
			t.Fatalf("observe = %+v", o)
		}
		return o.Workers[0].Connections
	}
	if n := connections(); n != 43 {
		t.Fatalf("before any reload: %d connections, want 43 (stot + req_tot: not known graceful)", n)
	}
	const front = "frontend _front_http\n    mode http\n    bind :80\n"
	write("defaults\n    mode http\n    timeout client 10s\n    timeout client-fin 5s\n    option idle-close-on-response\n" + front)
	reloaded()
	if n := connections(); n != 3 {
		t.Errorf("after the reload to a graceful frontend: %d connections, want 3 (stot only)", n)
	}
	write("defaults\n    mode http\n    timeout client 10s\n    timeout client-fin 5s\n" + front)
	reloaded()
	if n := connections(); n != 43 {
		t.Errorf("after the reload that drops idle-close-on-response: %d connections, want 43", n)
	}
	os.Remove(cfg)
	reloaded()
	if n := connections(); n != 43 {
		t.Errorf("a configuration that cannot be read changed the set: %d connections, want 43", n)
	}
}

// landReload is the loop's side of a reload that landed: its log line,
// which asks for an inspection, then the inspection's result once the
// inspector hands it over.
func landReload(t *testing.T, l *loop) {
	t.Helper()
	l.logReload(status.Reload{Result: status.ReloadOK, Origin: "master CLI"})
	select {
	case r := <-l.inspector.resultsCh():
		l.onInspection(r)
	case <-time.After(time.Minute):
		t.Fatal("no inspection a minute after the reload")
	}
}

// A configuration that a reload leaves as a FIFO (or a device) is not
// read: the loop goes on at once and logs that it was not inspected,
// naming the file; reading it on the loop blocked hapsuper for good.
func TestReinspect_FIFODoesNotBlockTheLoop(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "haproxy.cfg")
	if err := syscall.Mkfifo(cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	s := testSettings
	s.HAProxy = []string{"haproxy", "-W", "-f", cfg}
	var out bytes.Buffer
	l := &loop{log: slog.New(slog.NewTextHandler(&out, nil)), settings: s, reloads: newReloads(), graceful: newFrontendSet(nil)}
	t.Cleanup(func() { l.inspector.stop() })
	returned := make(chan struct{})
	go func() {
		defer close(returned)
		l.logReload(status.Reload{Result: status.ReloadOK, Origin: "master CLI"})
	}()
	select {
	case <-returned:
	case <-time.After(time.Minute):
		t.Fatal("the loop is still in the reload's handling a minute later: the inspection blocks it")
	}
	select {
	case r := <-l.inspector.resultsCh():
		l.onInspection(r)
	case <-time.After(time.Minute):
		t.Fatal("no inspection a minute after the reload")
	}
	if text := out.String(); !strings.Contains(text, "configuration after the reload not inspected") || !strings.Contains(text, cfg) || !strings.Contains(text, "a FIFO") {
		t.Errorf("want a warning naming %s as a FIFO:\n%s", cfg, text)
	}
}

// The loop keeps turning while an inspection runs; reloads that land
// meanwhile coalesce into one more reading, and the loop takes the latest
// result only.
func TestReinspect_OffTheLoopLatestWins(t *testing.T) {
	var calls atomic.Int32
	reading := make(chan int32)
	release := make(chan struct{})
	in := newInspector(func() (haproxy.Inspection, error) {
		n := calls.Add(1)
		reading <- n
		<-release
		return haproxy.Inspection{Frontends: []haproxy.Frontend{{Name: fmt.Sprint("read-", n), Mode: "tcp", Graceful: true}}}, nil
	})
	var out bytes.Buffer
	l := &loop{log: slog.New(slog.NewTextHandler(&out, nil)), settings: testSettings, reloads: newReloads(), graceful: newFrontendSet(nil), inspector: in}
	t.Cleanup(func() { close(release); in.stop() })
	landed := func() { l.logReload(status.Reload{Result: status.ReloadOK, Origin: "master CLI"}) }

	// The loop's select, as run has it: ticks go on while the first
	// reading is held.
	landed()
	if n := waitRead(t, reading); n != 1 {
		t.Fatalf("reading %d, want 1", n)
	}
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for ticks := 0; ticks < 5; {
		select {
		case <-tick.C:
			ticks++
		case r := <-l.inspector.resultsCh():
			t.Fatalf("a result %+v while the reading is held", r)
		case <-time.After(time.Minute):
			t.Fatal("the loop did not tick for a minute while an inspection ran")
		}
	}
	for range 3 { // reloads that land during the reading: one more reading
		landed()
	}
	release <- struct{}{}
	if n := waitRead(t, reading); n != 2 {
		t.Fatalf("reading %d, want 2 (the three requests coalesced)", n)
	}
	release <- struct{}{}
	// A third reload: once its reading begins, the second reading's result
	// was handed over, and the loop, which took neither, finds it alone.
	landed()
	if n := waitRead(t, reading); n != 3 {
		t.Fatalf("reading %d, want 3", n)
	}
	if n := len(in.results); n != 1 {
		t.Fatalf("%d results wait, want 1", n)
	}
	l.onInspection(<-l.inspector.resultsCh())
	if got := l.graceful.load(); !got["read-2"] || len(got) != 1 {
		t.Errorf("graceful frontends %v, want the second reading's only (the first's was replaced)", got)
	}
	release <- struct{}{}
	select {
	case r := <-l.inspector.resultsCh():
		l.onInspection(r)
	case <-time.After(time.Minute):
		t.Fatal("no result a minute after the third reading")
	}
	if got := l.graceful.load(); !got["read-3"] {
		t.Errorf("graceful frontends %v, want the third reading's", got)
	}
}

// stop ends the goroutine, also while a reading waits for the loop to take
// a result, and a request after it reads nothing.
func TestReinspect_Stop(t *testing.T) {
	var calls atomic.Int32
	in := newInspector(func() (haproxy.Inspection, error) { calls.Add(1); return haproxy.Inspection{}, nil })
	in.request()
	deadline := time.After(time.Minute)
	for len(in.results) == 0 {
		select {
		case <-deadline:
			t.Fatal("no result a minute after the request")
		case <-time.After(time.Millisecond):
		}
	}
	in.request() // its result finds the slot full
	in.stop()
	select {
	case <-in.done:
	case <-time.After(time.Minute):
		t.Fatal("the inspector's goroutine still runs a minute after stop")
	}
	before := calls.Load()
	in.request()
	in.stop()
	if calls.Load() != before {
		t.Errorf("a request after stop read the configuration")
	}
}

func waitRead(t *testing.T, reading <-chan int32) int32 {
	t.Helper()
	select {
	case n := <-reading:
		return n
	case <-time.After(time.Minute):
		t.Fatal("no reading a minute after the request")
		return 0
	}
}

// BenchmarkReinspectLoopPause: the loop's longest pause between two of its
// turns (a 1 ms ticker standing for its events) across a reload of a
// generated configuration of 10,000 backends, with the inspection on the
// loop (as it was) and off it (reinspect); max-pause-ms is the figure.
func BenchmarkReinspectLoopPause(b *testing.B) {
	cfg := filepath.Join(b.TempDir(), "haproxy.cfg")
	if err := os.WriteFile(cfg, []byte(backendsConfig(10000)), 0o644); err != nil {
		b.Fatal(err)
	}
	s := testSettings
	s.HAProxy = []string{"haproxy", "-W", "-f", cfg}
	for _, mode := range []string{"on-loop", "off-loop"} {
		b.Run(mode, func(b *testing.B) {
			l := &loop{log: slog.New(slog.DiscardHandler), settings: s, reloads: newReloads(), graceful: newFrontendSet(nil)}
			defer func() { l.inspector.stop() }()
			tick := time.NewTicker(time.Millisecond)
			defer tick.Stop()
			var longest time.Duration
			for b.Loop() {
				last, turnsAfter, requested := time.Now(), -1, false
				for turnsAfter < 3 { // a few turns after the result: the pause it caused is seen
					select {
					case <-tick.C:
						if !requested {
							requested = true
							if mode == "on-loop" {
								insp, err := inspectConfig(s)()
								l.onInspection(inspection{insp, err})
								turnsAfter = 0
							} else {
								l.logReload(status.Reload{Result: status.ReloadOK, Origin: "master CLI"})
							}
						}
					case r := <-l.inspector.resultsCh():
						l.onInspection(r)
						turnsAfter = 0
					}
					now := time.Now()
					longest = max(longest, now.Sub(last))
					last = now
					if turnsAfter >= 0 {
						turnsAfter++
					}
				}
				if !l.graceful.load()["http"] {
					b.Fatalf("the inspection did not find frontend http graceful")
				}
			}
			b.ReportMetric(float64(longest)/float64(time.Millisecond), "max-pause-ms")
		})
	}
}

// backendsConfig is a generated configuration of n backends, shaped like a
// controller's: two frontends, then the backends with their servers.
func backendsConfig(n int) string {
	var b strings.Builder
	b.WriteString("defaults\n    mode http\n    option idle-close-on-response\n    timeout client 50s\n    timeout client-fin 5s\n    timeout http-keep-alive 10s\n")
	b.WriteString("frontend http\n    bind :80\n    use_backend %[var(txn.path_match),field(1,.)]\nfrontend stats\n    bind :1024\n    stats enable\n")
	for i := range n {
		fmt.Fprintf(&b, "backend ns%d_svc%d_http\n    mode http\n    balance roundrobin\n    option forwardfor\n    server SRV_1 10.0.%d.%d:8080 check weight 128\n    server SRV_2 10.1.%d.%d:8080 check weight 128 disabled\n",
			i/100, i, i/250, i%250, i/250, i%250)
	}
	return b.String()
}

// A configuration hapsuper does not read at start (a FIFO here; a
// configuration over the cap alike) is a warning that names it, not a
// start that hangs or fails: HAProxy may load it all the same.
func TestPrepare_ConfigNotInspectedWarns(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "haproxy.cfg")
	if err := syscall.Mkfifo(cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	run := filepath.Join(dir, "run")
	s := testSettings
	s.HAProxy = []string{"haproxy", "-W", "-f", cfg}
	s.MasterSocket, s.StatusSocket, s.OverrideFile = filepath.Join(run, "master.sock"), filepath.Join(run, "status.sock"), filepath.Join(run, "override.cfg")
	var out bytes.Buffer
	sv := New(s, slog.New(slog.NewTextHandler(&out, nil)), nil)
	done := make(chan error, 1)
	go func() { _, err := sv.prepare(); done <- err }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("prepare: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("prepare still reading the configuration a minute later")
	}
	if text := out.String(); !strings.Contains(text, "configuration not inspected") || !strings.Contains(text, cfg) {
		t.Errorf("want a warning naming %s:\n%s", cfg, text)
	}
}
