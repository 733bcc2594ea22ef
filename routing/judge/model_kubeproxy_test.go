package judge

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	discovery "k8s.io/api/discovery/v1"
)

// A model kube-proxy for the model test (model_test.go): one node's
// kube-proxy 1.37 as the confirmation rule's assumptions (docs/routing.md)
// allow it to behave, in our clock, driven by events drawn from a seed.
// It knows the truth the rule must never get ahead of: the instant the
// node's IPv4 rules stopped picking the pod.
//
// What it plays, after pkg/proxy in kube-proxy 1.37:
//   - the withdrawal reaches the process at A = R + lag, lag in
//     [−Lag, D − longest sync] (D covers kube-proxy's lag behind us and
//     one sync);
//   - per family a proxier whose BoundedFrequencyRunner
//     (pkg/proxy/runner) starts a sync when Run was called and
//     minSyncPeriod has passed since the last sync ended; a sync takes
//     every change received before it started (checkoutChanges, which
//     zeroes endpoint_changes_pending, one gauge for both families) and
//     stamps healthz's lastUpdated and metrics' last_timestamp at its end;
//     a change delivered once the proxier is initialized stamps its
//     last_queued_timestamp (Proxier.Sync), as the sync loop's start does;
//   - a freeze (SIGSTOP): nothing runs, a sync under way ends that much
//     later, requests wait and are served at the resume; the changes
//     that came meanwhile are delivered over the catch-up after it, at
//     most the stall the observer saw (from the sending of the first
//     healthz request held to the resume), at most MinSync, which is the
//     docs' catch-up assumption ("as if the change had arrived at the
//     stall's end plus the stall's length, at most MinSync"). A freeze
//     lasts longer than the observer's longest gap between two healthz
//     requests, so that a request is held by it: a freeze no poll sees
//     breaks "a sync and the lag fit in D", outside the rule (the docs
//     name two such freezes timed to the polls);
//   - a restart: the process is killed (a sync under way never
//     completes, the old rules stay in the kernel), connections are
//     refused until the new one listens; it answers without per-family
//     status until its SyncLoop starts and stamps every family, lists the
//     cluster (holding the withdrawal when it was sent by then) and syncs
//     for the first time once its informers have synced;
//   - other changes, per family, at random, and with IPv6 beside IPv4 the
//     other family's syncs.
//
// Not played, each outside what the rule claims: a failing sync (no
// stamp, retried later: named in the docs), clock steps, healthz turning
// unhealthy (its timeout, 2 × syncPeriod, is longer than a run), and
// emulated healthz (never confirms, tested elsewhere).

const (
	modelV4 = discovery.AddressTypeIPv4
	modelV6 = discovery.AddressTypeIPv6
)

type modelKind int

const (
	modelDeliver  modelKind = iota // a change reaches the process's informer
	modelWake                      // the sync runner may start a sync
	modelSyncEnd                   // a sync completes
	modelResume                    // a freeze ends
	modelKill                      // the process is killed
	modelListen                    // a new process's servers accept
	modelSyncLoop                  // its SyncLoop starts: the start stamp
	modelList                      // its informers have listed and synced
)

// modelEvent is one thing the model does at an instant of our clock.
type modelEvent struct {
	at         time.Time
	seq        int
	kind       modelKind
	fam        discovery.AddressType
	gen        int  // the process it belongs to (wakes, sync ends)
	withdrawal bool // a delivery of the pod's withdrawal
}

// modelProxier is one family's proxier of one process.
type modelProxier struct {
	fam         discovery.AddressType
	pending     int       // changes received and not yet taken by a sync
	withdrawal  bool      // the withdrawal is among them
	queued      bool      // runner.Run called since the last sync started
	minUntil    time.Time // the runner's minIntervalTimer
	running     bool
	took        bool      // the running sync took the withdrawal
	lastUpdated time.Time // healthz's stamp, our clock; zero: no status yet
	lastSync    time.Time // metrics' last_timestamp, our clock; zero: none
	lastQueued  time.Time // metrics' last_queued_timestamp, our clock; zero: none
	started     time.Time // the running sync's start
	count       int       // the duration histogram's count and sum
	sum         time.Duration
	loop        bool // SyncLoop has started
	initialized bool // its informers have synced
}

// modelProcess is one kube-proxy process.
type modelProcess struct {
	gen       int
	start     time.Time // our clock
	startRead time.Time // process_start_time_seconds: up to 1 s early
	listed    bool      // its informers have listed: it receives changes
	proxiers  []*modelProxier
	gauge     int // endpoint_changes_pending
}

func (p *modelProcess) proxier(fam discovery.AddressType) *modelProxier {
	for _, x := range p.proxiers {
		if x.fam == fam {
			return x
		}
	}
	return nil
}

// modelFreeze is one SIGSTOP to SIGCONT.
type modelFreeze struct {
	from, to  time.Time
	firstHeld time.Time // sending of the first healthz request it held
	catchUp   time.Duration
}

// modelRestart is one kill and the new process's start.
type modelRestart struct {
	kill, listen, syncLoop, list time.Time
}

type kubeProxyModel struct {
	rng              *rand.Rand
	tl               *modelTimeline
	rule             Rule
	R, A             time.Time // our receipt of the withdrawal; kube-proxy's
	skew             time.Duration
	minSync          time.Duration // the cluster's minSyncPeriod
	syncMin, syncMax time.Duration
	fams             []discovery.AddressType
	freezes          []*modelFreeze
	restart          *modelRestart
	proc             *modelProcess
	events           []modelEvent
	deferred         []modelEvent // held by a freeze
	seq              int
	now              time.Time // processed: every event before it
	truth            time.Time // the IPv4 rules stopped picking the pod
	unseen           []string  // freezes no poll saw (a model bug: must not happen)
}

func (m *kubeProxyModel) push(e modelEvent) {
	m.seq++
	e.seq = m.seq
	m.events = append(m.events, e)
}

// next removes the earliest event before t, if any.
func (m *kubeProxyModel) next(t time.Time) (modelEvent, bool) {
	best := -1
	for i, e := range m.events {
		if !e.at.Before(t) {
			continue
		}
		if best < 0 || e.at.Before(m.events[best].at) || (e.at.Equal(m.events[best].at) && e.seq < m.events[best].seq) {
			best = i
		}
	}
	if best < 0 {
		return modelEvent{}, false
	}
	e := m.events[best]
	m.events = slices.Delete(m.events, best, best+1)
	return e, true
}

// frozen is the freeze that holds instant t, if any.
func (m *kubeProxyModel) frozen(t time.Time) *modelFreeze {
	for _, f := range m.freezes {
		if !t.Before(f.from) && t.Before(f.to) {
			return f
		}
	}
	return nil
}

// alive is the generation of the process whose servers accept a
// connection at t (a frozen one's kernel does), or −1.
func (m *kubeProxyModel) alive(t time.Time) int {
	r := m.restart
	switch {
	case r == nil || t.Before(r.kill):
		return 0
	case t.Before(r.listen):
		return -1
	}
	return 1
}

// served is when a request reaching the node at t is answered: at once,
// or at the resume of a freeze holding t. A healthz request held is
// noted: the first one bounds the catch-up after the resume.
func (m *kubeProxyModel) served(t, sent time.Time, healthz bool) time.Time {
	f := m.frozen(t)
	if f == nil {
		return t
	}
	if healthz && (f.firstHeld.IsZero() || sent.Before(f.firstHeld)) {
		f.firstHeld = sent
	}
	return f.to
}

// advance plays every event before t.
func (m *kubeProxyModel) advance(t time.Time) {
	for {
		e, ok := m.next(t)
		if !ok {
			break
		}
		m.play(e)
	}
	m.now = maxTime(m.now, t)
}

func (m *kubeProxyModel) play(e modelEvent) {
	if f := m.frozen(e.at); f != nil && e.kind != modelResume {
		m.deferred = append(m.deferred, e) // the process does nothing now
		return
	}
	switch e.kind {
	case modelDeliver:
		m.deliver(e)
	case modelWake:
		if e.gen == m.proc.gen {
			m.wake(e.at, m.proc.proxier(e.fam))
		}
	case modelSyncEnd:
		if e.gen == m.proc.gen {
			m.syncEnd(e.at, m.proc.proxier(e.fam))
		}
	case modelResume:
		m.resume(e.at)
	case modelKill:
		m.tl.add(e.at, "kube-proxy", "killed (process %d): its rules stay in the kernel", m.proc.gen)
		m.proc = &modelProcess{gen: m.proc.gen + 1} // nothing runs until it listens
	case modelListen:
		p := m.proc
		p.start = e.at.Add(-time.Duration(m.rng.Int64N(int64(100 * ms))))
		p.startRead = p.start.Add(-time.Duration(m.rng.Int64N(int64(time.Second))))
		for _, fam := range m.fams {
			p.proxiers = append(p.proxiers, &modelProxier{fam: fam})
		}
		m.tl.add(e.at, "kube-proxy", "process %d listens (started R%s, start read as R%s): answers without per-family status",
			p.gen, modelOff(m.R, p.start), modelOff(m.R, p.startRead))
	case modelSyncLoop:
		m.tl.add(e.at, "kube-proxy", "SyncLoop starts: start stamp on every family")
		for _, x := range m.proc.proxiers {
			x.loop, x.lastUpdated, x.lastQueued = true, e.at, e.at
			m.schedule(e.at, x)
		}
	case modelList:
		p := m.proc
		p.listed = true
		has := !m.A.After(e.at)
		m.tl.add(e.at, "kube-proxy", "informers synced: the list holds the withdrawal: %v", has)
		for _, x := range p.proxiers {
			x.pending += 10
			p.gauge += 10
			x.withdrawal = x.fam == modelV4 && has
			x.initialized, x.queued = true, true
			m.schedule(e.at, x)
		}
	}
}

func (m *kubeProxyModel) deliver(e modelEvent) {
	p := m.proc
	if !p.listed {
		return // a dead or starting process: its list will hold it
	}
	x := p.proxier(e.fam)
	x.pending++
	p.gauge++
	if e.withdrawal {
		x.withdrawal = true
		m.tl.add(e.at, "kube-proxy", "receives the withdrawal (%s)", e.fam)
	}
	if x.initialized {
		x.queued, x.lastQueued = true, e.at // Proxier.Sync: the queued stamp, then runner.Run
		m.schedule(e.at, x)
	}
}

// schedule wakes the runner once it may start a sync.
func (m *kubeProxyModel) schedule(now time.Time, x *modelProxier) {
	if x.running || !x.queued || !x.loop {
		return
	}
	m.push(modelEvent{at: maxTime(now, x.minUntil), kind: modelWake, fam: x.fam, gen: m.proc.gen})
}

func (m *kubeProxyModel) wake(now time.Time, x *modelProxier) {
	if x.running || !x.queued || !x.loop || !x.initialized || now.Before(x.minUntil) {
		return
	}
	x.queued, x.running, x.took, x.started = false, true, x.withdrawal, now
	x.withdrawal, x.pending = false, 0
	m.proc.gauge = 0 // checkoutChanges, at the sync's start
	d := m.syncMin + time.Duration(m.rng.Int64N(int64(m.syncMax-m.syncMin)+1))
	if m.rng.IntN(4) == 0 {
		d = m.syncMax
	}
	end := m.busy(now, d)
	m.tl.add(now, "kube-proxy", "%s sync starts (holds the withdrawal: %v), ends at R%s", x.fam, x.took, modelOff(m.R, end))
	m.push(modelEvent{at: end, kind: modelSyncEnd, fam: x.fam, gen: m.proc.gen})
}

// busy is when work of length d started at st ends: later by every freeze
// that begins while it runs.
func (m *kubeProxyModel) busy(st time.Time, d time.Duration) time.Time {
	end := st.Add(d)
	for _, f := range m.freezes {
		if f.from.After(st) && !f.from.After(end) {
			end = end.Add(f.to.Sub(f.from))
		}
	}
	return end
}

func (m *kubeProxyModel) syncEnd(now time.Time, x *modelProxier) {
	x.running = false
	x.lastUpdated, x.lastSync = now, now
	x.count++
	x.sum += now.Sub(x.started)
	x.minUntil = now.Add(m.minSync)
	if x.took && x.fam == modelV4 && m.truth.IsZero() {
		m.truth = now
		m.tl.add(now, "kube-proxy", "IPv4 sync ends: the rules no longer pick the pod (TRUTH)")
	} else {
		m.tl.add(now, "kube-proxy", "%s sync ends", x.fam)
	}
	m.schedule(now, x)
}

// resume ends a freeze: the runner's timers have expired, and the watch
// events that came meanwhile are delivered over the catch-up.
func (m *kubeProxyModel) resume(now time.Time) {
	f := m.frozen(now.Add(-time.Nanosecond))
	if f.firstHeld.IsZero() || now.Sub(f.firstHeld) <= quickAnswer {
		m.unseen = append(m.unseen, fmt.Sprintf("freeze R%s–R%s", modelOff(m.R, f.from), modelOff(m.R, f.to)))
	}
	bound := time.Duration(0)
	if !f.firstHeld.IsZero() {
		bound = min(now.Sub(f.firstHeld), m.rule.MinSync)
	}
	f.catchUp = bound
	m.tl.add(now, "kube-proxy", "resumes; first healthz request held sent at R%s; catch-up at most %v",
		modelOff(m.R, f.firstHeld), bound)
	for _, e := range m.deferred {
		switch e.kind {
		case modelDeliver:
			u := time.Duration(m.rng.Int64N(int64(bound) + 1))
			if e.withdrawal && m.rng.IntN(2) == 0 {
				u = bound
			}
			e.at = now.Add(u)
			if e.withdrawal {
				m.tl.add(now, "kube-proxy", "the withdrawal, sent during the freeze, is delivered at R%s", modelOff(m.R, e.at))
			}
		default:
			e.at = now
		}
		m.push(e)
	}
	m.deferred = m.deferred[:0]
}

// healthz is the answer kube-proxy's healthz serves at t.
func (m *kubeProxyModel) healthz(t time.Time) Healthz {
	m.advance(t)
	h := Healthz{CurrentTime: t.Add(m.skew), Families: map[discovery.AddressType]FamilyHealth{}, Proxy: ProxyKubeProxy}
	for _, x := range m.proc.proxiers {
		if !x.lastUpdated.IsZero() {
			h.Families[x.fam] = FamilyHealth{LastUpdated: x.lastUpdated.Add(m.skew), Healthy: true}
		}
	}
	return h
}

// metrics is the answer kube-proxy's /metrics serves at t: the sync
// stamp is set microseconds after healthz's.
func (m *kubeProxyModel) metrics(t time.Time) Metrics {
	m.advance(t)
	p := m.proc
	mm := Metrics{ProcessStart: p.startRead.Add(m.skew), Synced: map[discovery.AddressType]time.Time{}, Pending: p.gauge, HasPending: true,
		Durations: map[discovery.AddressType]SyncDurations{}, Queued: map[discovery.AddressType]time.Time{}}
	for _, x := range p.proxiers {
		if !x.lastSync.IsZero() {
			mm.Synced[x.fam] = x.lastSync.Add(m.skew + 20*time.Microsecond)
		}
		if !x.lastQueued.IsZero() {
			mm.Queued[x.fam] = x.lastQueued.Add(m.skew)
		}
		mm.Durations[x.fam] = SyncDurations{Count: uint64(x.count), Sum: x.sum.Seconds()}
	}
	return mm
}

// modelTimeline is a run's events, answers and judgments, printed when
// the property breaks.
type modelTimeline struct {
	R       time.Time
	entries []modelEntry
}

type modelEntry struct {
	at     time.Time
	seq    int
	who    string
	format string
	args   []any
}

func (tl *modelTimeline) add(at time.Time, who, format string, args ...any) {
	tl.entries = append(tl.entries, modelEntry{at: at, seq: len(tl.entries), who: who, format: format, args: args})
}

func (tl *modelTimeline) String() string {
	es := slices.Clone(tl.entries)
	slices.SortStableFunc(es, func(a, b modelEntry) int { return a.at.Compare(b.at) })
	var b strings.Builder
	for _, e := range es {
		fmt.Fprintf(&b, "  R%-10s %-10s %s\n", modelOff(tl.R, e.at), e.who, fmt.Sprintf(e.format, e.args...))
	}
	return b.String()
}

// modelOff writes t as an offset from R, to the microsecond.
func modelOff(R, t time.Time) string {
	if t.IsZero() {
		return "(never)"
	}
	d := t.Sub(R).Round(time.Microsecond)
	if d >= 0 {
		return "+" + d.String()
	}
	return d.String()
}
