package k8s_test

// A drain through a reload storm, with either real controller: the
// controller reloads HAProxy every 2 s from before the stop request until
// hapsuper exits, and requests keep reaching the draining pod for 8 s of
// its drain (four reloads land meanwhile), then stop. A reload is no
// client traffic: nothing fails, the drain ends routed-away, the quiet
// clock's last change is the last request's reading even though a reload
// started between that request and the drain's end, and the drain ends
// within the withdrawn quiet period + 0.5 s of the later of the last
// request and routing's confirmed withdrawal.
//
// What keeps requests coming after the stop request is a replacement that
// is not Ready yet, as in a rolling update: the other ingress pod's
// readiness fails before the draining pod is deleted, so kube-proxy falls
// back to the draining pod's serving-terminating endpoint on every node
// (hapsuper's routing stays pending) until the replacement turns Ready. A
// client aiming at the pod's IP directly (a load balancer in IP-target
// mode) would keep them coming too, but hapsuper counts connections
// arriving after a confirmed withdrawal as late, from a path it does not
// observe, and ends such a drain unverified, not routed-away.
//
// Where the requests stop with routing's withdrawal, kube-proxy's
// confirmation comes 1-2 s after the last request (docs/routing.md, rule
// 3: an ambiguous sync needs minSyncPeriod + the sync allowance of
// silence), and the drain ends at that confirmation. A reload that
// restarted quiet would move the quiet clock there, but end the drain
// later only if it landed in the last withdrawn quiet period before the
// confirmation: the quiet clock is what tells the two apart on every run.

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hapsuper/hapsuper/status"
	"github.com/hapsuper/hapsuper/test/harness"
	"github.com/hapsuper/hapsuper/test/k8s/k8stest"
)

// The storm's timings: the controller's edit interval, how long after the
// stop request the replacement turns Ready (requests reach the draining
// pod until then) and the reloads that must land in the drain.
const (
	stormEvery    = 2 * time.Second
	stormFallback = 8 * time.Second
	stormReloads  = 3
	// stormReloadsAtLeast is the fewest a run accepts: a controller on a
	// loaded machine (load average 14) landed 3-4 in the drain.
	stormReloadsAtLeast = 2
)

// arrivals is the backend's record of the client requests it was sent,
// per ingress pod that forwarded them (the connection's source address):
// how many, and when the last one came, on the test's clock. Requests
// without X-Forwarded-For (HAProxy's health checks) are not clients'.
type arrivals struct {
	mu    sync.Mutex
	count map[netip.Addr]int
	last  map[netip.Addr]time.Time
}

// handler answers every request with name, as the default backend does,
// and records it.
func (a *arrivals) handler(name string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := time.Now()
		if ap, err := netip.ParseAddrPort(r.RemoteAddr); err == nil && r.Header.Get("X-Forwarded-For") != "" {
			a.mu.Lock()
			if a.count == nil {
				a.count, a.last = map[netip.Addr]int{}, map[netip.Addr]time.Time{}
			}
			a.count[ap.Addr().Unmap()]++
			a.last[ap.Addr().Unmap()] = now
			a.mu.Unlock()
		}
		_, _ = io.WriteString(w, name)
	})
}

// from returns how many requests from forwarded and the last one's arrival.
func (a *arrivals) from(from netip.Addr) (int, time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.count[from], a.last[from]
}

// onlyFrom waits (bounded) until for a full second every request came from
// pod, none from the others: kube-proxy routes to pod alone on every node.
func (a *arrivals) onlyFrom(t *testing.T, pod netip.Addr, others ...netip.Addr) {
	t.Helper()
	seen := func() (int, int) {
		n, _ := a.from(pod)
		m := 0
		for _, o := range others {
			c, _ := a.from(o)
			m += c
		}
		return n, m
	}
	for deadline := time.Now().Add(20 * time.Second); ; {
		n0, m0 := seen()
		time.Sleep(time.Second)
		n1, m1 := seen()
		if n1 > n0 && m1 == m0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("requests still reach other pods than %s (%d in the last second; %d to it)", pod, m1-m0, n1-n0)
		}
	}
}

// editLoop is the controller's reason to reload: a configuration edit every
// stormEvery, in a goroutine of its own, until stop.
type editLoop struct {
	stop, done    chan struct{}
	edits, failed int
	at            []time.Time // when each applied edit returned
}

// startEdits calls edit(i) every stormEvery until the loop is stopped.
func startEdits(t *testing.T, edit func(i int) error) *editLoop {
	l := &editLoop{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(l.done)
		tick := time.NewTicker(stormEvery)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-l.stop:
				return
			case <-tick.C:
				if err := edit(i); err != nil {
					l.failed++
				} else {
					l.edits++
					l.at = append(l.at, time.Now())
				}
			}
		}
	}()
	t.Cleanup(l.halt)
	return l
}

// halt stops the edits and waits (bounded by the edit's own timeout) for
// the one in flight.
func (l *editLoop) halt() {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	select {
	case <-l.done:
	case <-time.After(15 * time.Second):
	}
}

// storm is one run of the scenario on either controller's pods.
type storm struct {
	e        *drainEnv
	url      string                 // the ingress Service
	backend  *arrivals              // web-0's record
	draining *hapPod                // the pod deleted
	other    *k8stest.Pod           // the replacement, not Ready from before the stop until stormFallback after it
	grace    time.Duration          // the delete's grace period: the chart's
	edit     func(i int) error      // a configuration change the controller applies by a reload
	reloads  func() []harness.Entry // the controller's reloads hapsuper logged ok
	status   func() (status.Snapshot, error)
}

// stormRun is what a run measured.
type stormRun struct {
	drainRecord
	requests, failed int
	reloads, during  int           // reloads logged ok in the drain (stop request to soft stop), and of those while requests still arrived
	forwarded        int           // requests the draining pod forwarded after the stop request
	last             time.Time     // the last of them, at the backend
	quiet            time.Duration // the withdrawn quiet period, as hapsuper's status says it
	since            time.Time     // the quiet clock's last change, as the last status of the drain said it
	quietDetail      string        // what that status said of quiet
	reloadAfter      time.Time     // the first reload HAProxy started after the last request
}

// stormEditPhase is how long after the stop request (and the replacement's
// Ready) an edit comes: its reload starts 0.15-1.4 s later (measured:
// haproxy-ingress 0.2-0.3 s, the haproxytech controller at
// --sync-period=500ms 0.15-1.4 s), after the last request (0-0.2 s after
// the Ready) and mostly before kube-proxy's confirmation (1.8-2 s after it).
const stormEditPhase = 300 * time.Millisecond

// stormReadingLag is how long after a request reaches HAProxy the counters
// read show it, with room for a loaded machine: a poll every 100 ms, each
// taking a few ms idle. A reload that starts sooner may make that reading
// come after it.
const stormReadingLag = 400 * time.Millisecond

func (r stormRun) String() string {
	return fmt.Sprintf("%d requests, %d failed; %d reloads ok in the drain (%d while requests still arrived); the draining pod forwarded %d requests after the stop request, the last +%.2fs after it; drain ended %.3fs after that and %.3fs after routing's withdrawal (%s: %s), withdrawn quiet period %v",
		r.requests, r.failed, r.reloads, r.during, r.forwarded, r.last.Sub(r.term).Seconds(), r.Ended.Sub(r.last).Seconds(), r.Ended.Sub(r.Withdrawn).Seconds(), r.Reason, r.Detail, r.quiet)
}

// run runs the scenario and checks it. The edits come every stormEvery,
// from 1.4 s before the stop request on: stormEditPhase after the stop
// and after the replacement's Ready, so that reloads land in the drain
// while requests arrive, and one starts between the last request (the
// replacement's Ready) and routing's confirmation, about 1.8 s later.
func (s storm) run(t *testing.T) stormRun {
	t.Helper()
	h := s.e.H
	api := func(call func(ctx context.Context) error) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := call(ctx); err != nil {
			t.Fatal(err)
		}
	}
	snap, err := s.status()
	if err != nil {
		t.Fatalf("hapsuper's status: %v", err)
	}
	quiet := time.Duration(snap.Settings.WithdrawnQuietPeriod)
	if snap.Settings.Routing != "kube-proxy" || quiet <= 0 {
		t.Fatalf("hapsuper's status: routing %q, withdrawn quiet period %v: want kube-proxy and a period", snap.Settings.Routing, quiet)
	}
	// The replacement's readiness fails; the scenario's clients start once
	// kube-proxy routes to the draining pod alone. Those that showed it
	// are not the drain's: their failures are logged, not counted (on a
	// machine loaded to 14, kube-proxy's sync of that change took 1.3 s and
	// requests sent meanwhile timed out).
	api(func(ctx context.Context) error { return h.SetPodReady(ctx, s.other, false) })
	warm := startTraffic(t, s.url, h.Nodes(), nil)
	s.backend.onlyFrom(t, s.draining.Pod.IP, s.other.IP)
	warm.Stop()
	if bad := warm.failedBefore(time.Time{}); len(bad) > 0 {
		t.Logf("while kube-proxy took the replacement out, before the scenario, %d of %d requests failed:%s", len(bad), len(warm.Outcomes()), harness.Describe(bad, 5))
	}
	tr := startTraffic(t, s.url, h.Nodes(), nil)
	edits := startEdits(t, s.edit)
	time.Sleep(2*stormEvery - stormEditPhase)
	before, _ := s.backend.from(s.draining.Pod.IP)
	watch := watchDrain(s.status)
	api(func(ctx context.Context) error { return h.DeletePod(ctx, s.draining.Pod, s.grace) })
	s.draining.deletedAt = time.Now()
	s.draining.sigterm(t)
	select {
	case <-s.draining.Done():
		t.Fatalf("pod %s: hapsuper exited while the replacement was not Ready (kube-proxy still routed to it); log:\n%s", s.draining.Name, s.draining.Tail(60))
	case <-time.After(time.Until(s.draining.termAt.Add(stormFallback))):
	}
	ready := time.Now()
	api(func(ctx context.Context) error { return h.SetPodReady(ctx, s.other, true) })
	s.draining.waitExit(t, 30*time.Second)
	last := watch.stop()
	edits.halt()
	time.Sleep(300 * time.Millisecond)
	tr.Stop()
	t.Logf("clients: %s; configuration edits: %d applied, %d failed", tr.summary(), edits.edits, edits.failed)
	s.draining.finish(t)

	r := stormRun{drainRecord: s.draining.record(t), quiet: quiet}
	r.requests, r.failed = len(tr.Outcomes()), len(tr.failedBefore(time.Time{}))
	n, lastAt := s.backend.from(s.draining.Pod.IP)
	r.forwarded, r.last = n-before, lastAt
	for _, c := range last.Drain.Conditions {
		if c.Name == "quiet" {
			r.since, r.quietDetail = c.Since, c.Detail
		}
	}
	for _, l := range s.reloads() {
		if !l.At.Before(r.term) && (r.Soft.IsZero() || l.At.Before(r.Soft)) {
			r.reloads++
			if l.At.Before(r.last) {
				r.during++
			}
		}
	}
	var started []time.Time // HAProxy's master starting a reload
	for _, l := range s.draining.All("haproxy") {
		if l.Str("line") == "Reloading HAProxy" {
			started = append(started, l.At)
			if r.reloadAfter.IsZero() && l.At.After(r.last) {
				r.reloadAfter = l.At
			}
		}
	}
	t.Logf("%s: %s", r.pod, r)
	rel := func(ts ...time.Time) string {
		var b []string
		for _, at := range ts {
			if at.IsZero() {
				b = append(b, "never")
				continue
			}
			b = append(b, fmt.Sprintf("%+.2f", at.Sub(r.term).Seconds()))
		}
		return strings.Join(b, " ")
	}
	t.Logf("from the stop request (s): edits %s; reloads started %s; replacement Ready %s; last request %s; quiet clock's last change %s (status at %s: %q); routing withdrawn %s; drain ended %s",
		rel(edits.at...), rel(started...), rel(ready), rel(r.last), rel(r.since), rel(watch.at), r.quietDetail, rel(r.Withdrawn), rel(r.Ended))

	checkNoFailures(t, tr, time.Time{})
	checkReason(t, r.drainRecord, "routed-away")
	if r.code != 0 {
		t.Errorf("%s: hapsuper exited %d, want 0", r.pod, r.code)
	}
	// The scenario: requests reached the pod through most of the fallback,
	// reloads landed meanwhile, and one started between the last request
	// and the drain's end.
	if r.forwarded == 0 || r.last.Before(r.term.Add(stormFallback-time.Second)) {
		t.Errorf("%s: the last request it forwarded came %v after the stop request: want requests until the replacement turned Ready (%v)", r.pod, r.last.Sub(r.term), stormFallback)
	}
	if r.reloads < stormReloadsAtLeast {
		t.Errorf("%s: %d controller reloads logged ok during the drain, want at least %d (%d aimed at): the scenario did not test a reload storm", r.pod, r.reloads, stormReloadsAtLeast, stormReloads)
	}
	if r.reloadAfter.IsZero() || !r.reloadAfter.Before(watch.at) {
		// kube-proxy's sync was not ambiguous (the confirmation came
		// within a reload's interval of the last request) or the
		// controller was slow: the quiet clock's check below has no
		// reload after the last request to tell by in this run. Said,
		// not failed: the window is the cluster's timing, not hapsuper's.
		t.Logf("NOTE %s: no reload started between the last request and the drain's last status: this run checks the reloads during the requests only", r.pod)
	}
	// A reload is no traffic: it does not move the quiet clock. Its last
	// change, in the last status of the drain (the request clock's, whose
	// 2 s have not passed: it says what moved it), is the last request's
	// reading, not the end of a reload's blind spell; and where the reload
	// started long enough after the last request, it came before it.
	switch {
	case r.since.IsZero():
		t.Errorf("%s: no status of the drain showed the quiet clock", r.pod)
	case strings.HasPrefix(r.quietDetail, "counters readable again"):
		t.Errorf("%s: the quiet clock last moved %v after the last request, when the counters were readable again after a reload (%q): a reload restarted quiet",
			r.pod, r.since.Sub(r.last).Round(time.Millisecond), r.quietDetail)
	case !r.reloadAfter.IsZero() && !r.reloadAfter.Before(r.last.Add(stormReadingLag)):
		if !r.since.Before(r.reloadAfter) {
			t.Errorf("%s: the quiet clock last moved %v after the last request, at or after a reload started %v after it: a reload restarted quiet",
				r.pod, r.since.Sub(r.last).Round(time.Millisecond), r.reloadAfter.Sub(r.last).Round(time.Millisecond))
		}
	}
	// The drain's end: within the withdrawn quiet period + 0.5 s of the
	// later of the last request and routing's confirmed withdrawal, which
	// the drain waits for (kube-proxy's confirmation comes 1-2 s after the
	// last request here).
	from := r.last
	if r.Withdrawn.After(from) {
		from = r.Withdrawn
	}
	if r.Withdrawn.IsZero() {
		t.Errorf("%s: hapsuper never logged routing state=withdrawn", r.pod)
	} else if gap := r.Ended.Sub(from); gap > quiet+500*time.Millisecond {
		t.Errorf("%s: drain ended %v after the later of the last request and routing's withdrawal, want within the withdrawn quiet period %v + 0.5 s", r.pod, gap.Round(time.Millisecond), quiet)
	}
	return r
}

// drainWatch asks hapsuper's status every 100 ms and keeps the last answer
// given while the drain was under way.
type drainWatch struct {
	done, stopped chan struct{}
	last          status.Snapshot
	at            time.Time
}

func watchDrain(ask func() (status.Snapshot, error)) *drainWatch {
	w := &drainWatch{done: make(chan struct{}), stopped: make(chan struct{})}
	go func() {
		defer close(w.stopped)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-w.done:
				return
			case <-tick.C:
				if s, err := ask(); err == nil && s.Drain.Phase == "draining" {
					w.last, w.at = s, time.Now()
				}
			}
		}
	}()
	return w
}

// stop ends the watch and returns the last status of the drain.
func (w *drainWatch) stop() status.Snapshot {
	close(w.done)
	<-w.stopped
	return w.last
}

// fetchStatus asks hapsuper's status socket at path.
func fetchStatus(path string) (status.Snapshot, error) {
	return status.Fetch(path, 2*time.Second)
}
