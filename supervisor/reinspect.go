package supervisor

import (
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hapsuper/hapsuper/conf"
	"github.com/hapsuper/hapsuper/haproxy"
)

// reinspect asks for HAProxy's configuration to be read again after a
// reload that landed: a controller (haproxy-ingress) starts HAProxy on a
// minimal configuration and writes the real one later, so what start
// inspected says nothing of the frontends clients reach. The reading runs
// off the loop (inspector), which takes the result in onInspection.
func (l *loop) reinspect() {
	if l.inspector == nil {
		l.inspector = newInspector(inspectConfig(l.settings))
	}
	l.inspector.request()
}

// onInspection acts on an inspection after a reload: it logs the warnings
// when they differ from those of the last reload, and hands the poller the
// frontends whose soft stop is graceful now (their kept-alive requests are
// then no new connections once routing is withdrawn). A frontend's name
// stands for the old workers' copy of it too: the latest configuration
// decides for both. A configuration that cannot be read leaves the last
// set as it was.
func (l *loop) onInspection(r inspection) {
	if r.err != nil {
		l.log.Warn("configuration after the reload not inspected", "err", r.err)
		return
	}
	l.reloadWarnings(r.insp.Warnings)
	if l.graceful != nil {
		l.graceful.store(gracefulFrontends(r.insp))
	}
}

// inspectConfig reads the configuration files that s's HAProxy command
// loads, as they are now.
func inspectConfig(s conf.Settings) func() (haproxy.Inspection, error) {
	return func() (haproxy.Inspection, error) {
		files, err := haproxy.ConfigFiles(s)
		if err != nil {
			return haproxy.Inspection{}, err
		}
		return haproxy.Inspect(files, s)
	}
}

// reloadWarnings logs warnings unless they are the last reload's.
func (l *loop) reloadWarnings(warnings []string) {
	sorted := slices.Sorted(slices.Values(warnings))
	key := strings.Join(sorted, "\n")
	if l.reloads.inspected && key == l.reloads.warnings {
		return
	}
	l.reloads.inspected, l.reloads.warnings = true, key
	for _, w := range sorted {
		l.log.Warn("config warning", "warning", w, "after", "reload")
	}
}

// inspection is what one reading of the configuration found.
type inspection struct {
	insp haproxy.Inspection
	err  error
}

// inspector reads the configuration off the loop: a generated one of
// 10,000 backends took the loop 0.8-1.5 s to parse in place, and a reload
// must not stop the drain's polls. One goroutine, started by the first
// request, reads when asked; requests that come while it reads coalesce
// into one more reading, so the latest configuration is the last one read.
// Each result waits for the loop in a one-slot channel (results), where a
// newer one replaces it: the goroutine never waits for the loop. The loop
// owns it and stops it as it returns (stop).
type inspector struct {
	inspect  func() (haproxy.Inspection, error)
	requests chan struct{}   // one slot: a reading is asked for
	results  chan inspection // one slot: the latest result the loop has not taken
	quit     chan struct{}
	done     chan struct{} // closed when the goroutine returned
	started  bool          // the goroutine runs; request and stop are the loop's
	stopped  bool
}

// inspectorStopWait bounds how long stop waits for a reading under way.
const inspectorStopWait = 2 * time.Second

func newInspector(inspect func() (haproxy.Inspection, error)) *inspector {
	return &inspector{
		inspect:  inspect,
		requests: make(chan struct{}, 1),
		results:  make(chan inspection, 1),
		quit:     make(chan struct{}),
		done:     make(chan struct{}),
	}
}

// request asks for a reading; it never blocks.
func (in *inspector) request() {
	if in.stopped {
		return
	}
	if !in.started {
		in.started = true
		go in.run()
	}
	select {
	case in.requests <- struct{}{}:
	default: // one is pending already: it reads the same files
	}
}

// resultsCh is the channel the loop takes results from; nil (never ready)
// without an inspector.
func (in *inspector) resultsCh() <-chan inspection {
	if in == nil {
		return nil
	}
	return in.results
}

// stop ends the goroutine; a reading under way is waited for up to
// inspectorStopWait (its result is dropped).
func (in *inspector) stop() {
	if in == nil {
		return
	}
	if in.stopped {
		return
	}
	in.stopped = true
	close(in.quit)
	if !in.started {
		return
	}
	select {
	case <-in.done:
	case <-time.After(inspectorStopWait):
	}
}

func (in *inspector) run() {
	defer close(in.done)
	for {
		select {
		case <-in.quit:
			return
		case <-in.requests:
		}
		insp, err := in.inspect()
		in.deliver(inspection{insp: insp, err: err})
	}
}

// deliver puts r in the results slot, replacing a result the loop has not
// taken.
func (in *inspector) deliver(r inspection) {
	for {
		select {
		case <-in.quit:
			return
		case in.results <- r:
			return
		case <-in.results:
		}
	}
}

// frontendSet is a set of frontend names that the loop replaces and the
// poller reads, each from its own goroutine; nil or empty: none.
type frontendSet struct {
	p atomic.Pointer[map[string]bool]
}

func newFrontendSet(m map[string]bool) *frontendSet {
	s := &frontendSet{}
	s.store(m)
	return s
}

func (s *frontendSet) store(m map[string]bool) { s.p.Store(&m) }

// load returns the set; a nil set is empty (reading a nil map is).
func (s *frontendSet) load() map[string]bool {
	if s == nil {
		return nil
	}
	if m := s.p.Load(); m != nil {
		return *m
	}
	return nil
}
