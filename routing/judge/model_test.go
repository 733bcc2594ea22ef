package judge

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	discovery "k8s.io/api/discovery/v1"
)

// The model test: the confirmation rule (Rule.Node) against a model
// kube-proxy (model_kubeproxy_test.go) polled as routing/ polls it, over
// answer timings drawn from a seed. The property: a node judged confirmed
// at t (our clock) had its rules drop the pod at or before t. Liveness,
// loosely: a run without a freeze or a restart, whose baseline answered,
// is confirmed within modelLiveBound of the change. With the metrics
// witness, whether kube-proxy or another listener answers on the metrics
// port: the same healthz answers judged without the metrics never confirm
// before the node is, and another listener never confirms it.

// The observer's settings the driver copies (routing/config.go).
const (
	modelTimeout   = time.Second // RequestTimeout
	modelMTimeout  = 200 * ms    // MetricsTimeout
	modelPollMin   = 100 * time.Millisecond
	modelPollMax   = 600 * time.Millisecond
	modelHorizon   = 20 * time.Second
	modelLiveBound = 8 * time.Second
)

// modelConn is the observer's kept healthz connection to the node.
type modelConn struct {
	gen      int  // the process that accepted it
	answered bool // it carried an answer (keptConn.answered)
	// waiting: a request timed out before any byte of its answer came;
	// the next poll reads its answer here (healthzClient.poll).
	waiting              bool
	waitSent, waitServed time.Time
	waitBack             time.Duration
	waitAnswer           Healthz // served at waitServed (all the model did until then was held by the freeze)
}

// modelDriver is routing/'s observer for one node: pollNode's calls into
// judge.Node in its order, with healthzClient's connection handling.
type modelDriver struct {
	rng     *rand.Rand
	m       *kubeProxyModel
	tl      *modelTimeline
	rule    Rule
	n       *Node
	conn    *modelConn
	metrics bool
	// metricsOff: a metrics request timed out or was refused; the node's
	// metrics are not asked again (pollNode's once-failed rule).
	metricsOff bool
	// impostor: another listener answers on the metrics port (kube-proxy's
	// own binds loopback): a start older than any connection, no change
	// pending, and stamps no healthz answer carries.
	impostor modelImpostor
	// alone is the same node judged on the same healthz answers without
	// the metrics: the witness must never confirm later than it.
	alone   *Node
	targets map[discovery.AddressType]time.Time
}

// modelImpostor is what answers on the metrics port.
type modelImpostor int

const (
	modelKubeProxyMetrics modelImpostor = iota
	modelNoStamps                       // an exporter with a process start and a zero gauge, no kube-proxy stamp
	modelOldStamps                      // rising stamps, none of them healthz's
	modelFarFuture                      // a stamp in the year 5000
)

// delay is one way of a request or answer: mostly quick, now and then
// slow enough to make an answer slower than quickAnswer.
func (d *modelDriver) delay() time.Duration {
	switch r := d.rng.IntN(100); {
	case r < 85:
		return time.Duration(100+d.rng.IntN(10_000)) * time.Microsecond
	case r < 98:
		return time.Duration(10+d.rng.IntN(140)) * ms
	default:
		return time.Duration(150+d.rng.IntN(250)) * ms
	}
}

// poll is one pollNode: healthz, then, after an answer, the metrics. It
// returns when the poll ended.
func (d *modelDriver) poll(sent time.Time) time.Time {
	to, back := d.delay(), d.delay()
	arrive := sent.Add(to)
	reconnected := false
	if c := d.conn; c != nil && c.gen != d.m.alive(arrive) {
		// The process that held it is gone: the node closed it.
		reconnected, d.conn = c.answered, nil
	}
	if c := d.conn; c != nil && c.waiting && d.rng.IntN(3) == 0 {
		// The network reset the connection while its request waited
		// (a middlebox's idle timeout, a conntrack flush): the client
		// dials again, as when the node closed it.
		d.tl.add(sent, "observer", "the connection waiting for an answer was reset")
		reconnected, d.conn = c.answered, nil
	}
	if c := d.conn; c != nil && c.waiting {
		ready := c.waitServed.Add(c.waitBack)
		if ready.Sub(sent) > modelTimeout {
			return d.failed(&PollError{Pending: true, Msg: "accepted but did not answer within 1s (still waiting)"}, sent, sent.Add(modelTimeout))
		}
		c.waiting = false
		return d.answered(c, c.waitAnswer, c.waitSent, c.waitServed, maxTime(ready, sent), false)
	}
	if d.conn == nil {
		gen := d.m.alive(arrive)
		if gen < 0 {
			d.conn = nil
			return d.failed(&PollError{Msg: "unreachable: connection refused"}, sent, arrive.Add(back))
		}
		d.conn = &modelConn{gen: gen}
	}
	c := d.conn
	served := d.m.served(arrive, sent, true)
	ready := served.Add(back)
	if ready.Sub(sent) > modelTimeout {
		c.waiting, c.waitSent, c.waitServed, c.waitBack = true, sent, served, back
		c.waitAnswer = d.m.healthz(served)
		return d.failed(&PollError{Pending: true, Msg: "accepted but did not answer within 1s"}, sent, sent.Add(modelTimeout))
	}
	return d.answered(c, d.m.healthz(served), sent, served, ready, reconnected)
}

func (d *modelDriver) failed(e *PollError, sent, now time.Time) time.Time {
	d.tl.add(now, "observer", "healthz sent R%s failed: %s", modelOff(d.tl.R, sent), e.Msg)
	d.n.Failed(e, sent, now)
	d.alone.Failed(e, sent, now)
	return now
}

// answered records healthz's answer h, served at served, read at received
// on c, then reads the metrics.
func (d *modelDriver) answered(c *modelConn, h Healthz, sent, served, received time.Time, reconnected bool) time.Time {
	kept := c.answered
	c.answered = true
	if len(h.Families) == 0 {
		return d.failed(&PollError{Msg: "answers as kube-proxy before 1.33: no per-family status", Proxy: ProxyKubeProxyOld}, sent, received)
	}
	d.tl.add(received, "observer", "healthz sent R%s served R%s: %s (kept %v, reconnected %v)",
		modelOff(d.tl.R, sent), modelOff(d.tl.R, served), d.describe(h), kept, reconnected)
	if reconnected {
		d.n.Reconnected()
		d.alone.Reconnected()
	}
	d.n.Record(h, sent, received, d.rule.Allowance, kept)
	d.alone.Record(h, sent, received, d.rule.Allowance, kept)
	if !d.metrics || d.metricsOff {
		return received
	}
	to, back := d.delay(), d.delay()
	arrive := received.Add(to)
	if d.impostor == modelKubeProxyMetrics && d.m.alive(arrive) < 0 {
		d.tl.add(arrive.Add(back), "observer", "metrics refused: not asked again")
		d.metricsOff = true
		d.n.MetricsOff()
		return arrive.Add(back)
	}
	mserved := arrive
	if d.impostor == modelKubeProxyMetrics {
		mserved = d.m.served(arrive, received, false)
	}
	ready := mserved.Add(back)
	if ready.Sub(received) > modelMTimeout {
		d.tl.add(received.Add(modelMTimeout), "observer", "metrics sent R%s timed out: not asked again", modelOff(d.tl.R, received))
		d.metricsOff = true
		d.n.MetricsOff()
		return received.Add(modelMTimeout)
	}
	mm := d.m.metrics(mserved)
	switch d.impostor {
	case modelNoStamps:
		mm = Metrics{ProcessStart: d.tl.R.Add(-24 * time.Hour), HasPending: true}
	case modelOldStamps:
		// Rising with the time served, an hour behind it: before any
		// stamp healthz shows in a run.
		old := mserved.Add(d.m.skew - time.Hour)
		mm = Metrics{ProcessStart: d.tl.R.Add(-24 * time.Hour), HasPending: true,
			Synced: map[discovery.AddressType]time.Time{modelV4: old}}
	case modelFarFuture:
		mm = Metrics{ProcessStart: d.tl.R.Add(-24 * time.Hour), HasPending: true,
			Synced: map[discovery.AddressType]time.Time{modelV4: time.Date(5000, 1, 1, 0, 0, 0, 0, time.UTC)}}
	}
	d.tl.add(ready, "observer", "metrics sent R%s served R%s: start R%s, pending %d, synced %s",
		modelOff(d.tl.R, received), modelOff(d.tl.R, mserved), modelOff(d.tl.R, mm.ProcessStart.Add(-d.m.skew)), mm.Pending, d.describeSynced(mm))
	d.n.RecordMetrics(mm, received, ready)
	return ready
}

func (d *modelDriver) describe(h Healthz) string {
	s := ""
	for _, fam := range []discovery.AddressType{modelV4, modelV6} {
		if f, ok := h.Families[fam]; ok {
			s += fmt.Sprintf("%s lastUpdated R%s age %v; ", fam, modelOff(d.tl.R, f.LastUpdated.Add(-d.m.skew)), h.CurrentTime.Sub(f.LastUpdated))
		}
	}
	return s
}

func (d *modelDriver) describeSynced(mm Metrics) string {
	s := ""
	for _, fam := range []discovery.AddressType{modelV4, modelV6} {
		if t, ok := mm.Synced[fam]; ok {
			s += fmt.Sprintf("%s R%s ", fam, modelOff(d.tl.R, t.Add(-d.m.skew)))
		}
	}
	return s
}

// modelResult is one run's outcome.
type modelResult struct {
	seed      uint64
	faults    string
	baseline  bool
	confirmed time.Time // our clock; zero: not by the horizon
	truth     time.Time
	violation string // the property broken, with the timeline
	unseen    []string
	witness   string // what confirmed it (Rule.Witness)
	metrics   bool   // the metrics witness was read
	impostor  modelImpostor
	polls     int
	tl        *modelTimeline
	lost      string // healthz alone confirmed, with the witness not yet
	raised    bool   // healthz alone confirmed first, with D raised by the syncs the metrics measured (Rule.For)
}

// newModel draws a run's kube-proxy and faults from seed.
// firstAsk is the observer's first request: a freeze begins after it,
// since one before it, unseen, would break the rule's premises (it can
// hold the change past D without a stall to show for it).
func newModel(seed uint64, rule Rule, tl *modelTimeline, firstAsk time.Time) (*kubeProxyModel, string) {
	rng := rand.New(rand.NewPCG(seed, 0x6b7562652d70726f))
	R := tl.R
	m := &kubeProxyModel{rng: rng, tl: tl, rule: rule, R: R,
		skew: time.Duration(rng.Int64N(int64(20*time.Second))) - 10*time.Second,
		fams: []discovery.AddressType{modelV4}}
	if rng.IntN(2) == 0 {
		m.fams = append(m.fams, modelV6)
	}
	// minSyncPeriod: at most the rule's, at least Lag + D (rule 3's premise).
	m.minSync = rule.Lag + rule.Allowance + time.Duration(rng.Int64N(int64(rule.MinSync-rule.Lag-rule.Allowance)+1))
	if rng.IntN(2) == 0 {
		m.minSync = rule.MinSync
	}
	// A sync and kube-proxy's lag behind us fit in D.
	m.syncMax = time.Duration(20+rng.IntN(180)) * ms
	m.syncMin = time.Duration(rng.Int64N(int64(m.syncMax)))
	lagMax := rule.Allowance - m.syncMax
	lag := time.Duration(rng.Int64N(int64(lagMax+rule.Lag)+1)) - rule.Lag
	switch rng.IntN(4) {
	case 0:
		lag = -rule.Lag
	case 1:
		lag = lagMax
	}
	m.A = R.Add(lag)

	start := R.Add(-8 * time.Second)
	p := &modelProcess{start: start.Add(-time.Hour), listed: true}
	p.startRead = p.start.Add(-time.Duration(rng.Int64N(int64(time.Second))))
	for _, fam := range m.fams {
		last := start.Add(-time.Duration(rng.Int64N(int64(20 * time.Second))))
		p.proxiers = append(p.proxiers, &modelProxier{fam: fam, lastUpdated: last, lastSync: last, loop: true, initialized: true})
	}
	m.proc = p
	m.now = start

	m.push(modelEvent{at: m.A, kind: modelDeliver, fam: modelV4, withdrawal: true})
	for _, fam := range m.fams {
		mean := time.Duration(200+rng.IntN(3800)) * ms
		for t := start; t.Before(R.Add(modelHorizon)); t = t.Add(time.Duration(rng.ExpFloat64() * float64(mean))) {
			m.push(modelEvent{at: t, kind: modelDeliver, fam: fam})
		}
	}
	if rng.IntN(2) == 0 { // a rolling update: a change just before, its sync in flight at A
		m.push(modelEvent{at: m.A.Add(-time.Duration(rng.Int64N(int64(m.syncMax)))), kind: modelDeliver, fam: modelV4})
	}

	// Faults: a restart or none, then up to two freezes, each after the
	// observer's first request, apart from each other and from the time
	// the process is dead (a restart's kill to its listen).
	restart := rng.IntN(2) == 0
	if restart {
		m.restartAt(R.Add(time.Duration(rng.Int64N(int64(8*time.Second))) - 3*time.Second))
	}
	freezes := [...]int{0, 0, 1, 1, 2}[rng.IntN(5)]
	for range freezes {
		for try := 0; try < 8; try++ {
			from := R.Add(time.Duration(rng.Int64N(int64(8*time.Second))) - 2*time.Second)
			if rng.IntN(4) == 0 { // just before the change reaches kube-proxy
				from = m.A.Add(-time.Duration(rng.Int64N(int64(200 * ms))))
			}
			from = maxTime(from, firstAsk)
			// Longer than the observer's longest gap between two healthz
			// requests (a metrics request's timeout plus a poll interval)
			// and quickAnswer: a healthz request is held, and seen slow.
			f := &modelFreeze{from: from, to: from.Add(1700*ms + time.Duration(rng.Int64N(int64(3300*ms))))}
			if m.placeFreeze(f) {
				break
			}
		}
	}
	faults := ""
	if restart {
		faults = "restart"
	}
	if len(m.freezes) > 0 {
		faults += fmt.Sprintf("+%d freeze", len(m.freezes))
	}
	faults = strings.TrimPrefix(faults, "+")
	if faults == "" {
		faults = "none"
	}
	tl.add(start, "model", "seed %d: faults %s, families %v, skew %v, minSyncPeriod %v, syncs %v–%v, withdrawal reaches kube-proxy at R%s",
		seed, faults, m.fams, m.skew, m.minSync, m.syncMin, m.syncMax, modelOff(R, m.A))
	return m, faults
}

// placeFreeze adds f unless it comes within 300 ms of another freeze or of
// the time no process runs.
func (m *kubeProxyModel) placeFreeze(f *modelFreeze) bool {
	near := func(from, to time.Time) bool {
		return f.from.Before(to.Add(300*ms)) && from.Before(f.to.Add(300*ms))
	}
	for _, g := range m.freezes {
		if near(g.from, g.to) {
			return false
		}
	}
	if r := m.restart; r != nil && near(r.kill, r.listen) {
		return false
	}
	m.freezes = append(m.freezes, f)
	slices.SortFunc(m.freezes, func(a, b *modelFreeze) int { return a.from.Compare(b.from) })
	m.push(modelEvent{at: f.to, kind: modelResume})
	m.tl.add(f.from, "kube-proxy", "frozen (SIGSTOP) until R%s", modelOff(m.R, f.to))
	return true
}

// restartAt kills the process at kill and starts another: refused until
// it listens, its SyncLoop's start stamp, its informers' list.
//
// A start stamp within [R − Lag, R + D) first seen on a new connection
// is judged as a sync (rules 2–3), and silence confirms it if the new
// process's lists take longer than MinSync: docs/routing.md names this
// the known limit of healthz. The metrics witness cannot close it: the
// new process has no sync stamp yet, so nothing ties its metrics to
// healthz's answers, and an untied answer counts for nothing. There, the
// model lists within MinSync of the stamp.
func (m *kubeProxyModel) restartAt(kill time.Time) {
	rng := m.rng
	r := &modelRestart{kill: kill, listen: kill.Add(time.Duration(rng.Int64N(int64(1500 * ms))))}
	r.syncLoop = r.listen.Add(time.Duration(rng.Int64N(int64(500 * ms))))
	r.list = r.listen.Add(time.Duration(rng.Int64N(int64(2 * time.Second))))
	if !r.syncLoop.Before(m.R.Add(-m.rule.Lag)) && r.syncLoop.Before(m.R.Add(m.rule.Allowance)) {
		r.list = minTime(r.list, r.syncLoop.Add(m.rule.MinSync))
	}
	m.restart = r
	m.push(modelEvent{at: r.kill, kind: modelKill})
	m.push(modelEvent{at: r.listen, kind: modelListen})
	m.push(modelEvent{at: r.syncLoop, kind: modelSyncLoop})
	m.push(modelEvent{at: r.list, kind: modelList})
}

// runModel plays one seed: the baseline (most runs), then polls at
// random intervals, judging by rule after every poll from R on, until
// confirmed or the horizon. The model kube-proxy keeps within modelRule's
// assumptions whatever rule judges it.
func runModel(seed uint64, rule Rule) modelResult {
	R := time.Date(2026, 12, 1, 10, 0, 10, 0, time.UTC)
	tl := &modelTimeline{R: R}
	rng := rand.New(rand.NewPCG(seed, 0x6f6273657276))
	metrics, baseline := rng.IntN(2) == 0, rng.IntN(10) != 0
	asked := R.Add(time.Duration(rng.Int64N(int64(50 * ms))))
	if baseline {
		asked = R.Add(-time.Duration(rng.Int64N(int64(1500 * ms))))
	}
	m, faults := newModel(seed, modelRule, tl, asked)
	d := &modelDriver{rng: rng, m: m, tl: tl, rule: rule, n: NewNode("n1", "10.0.0.1:10256"), alone: NewNode("n1", "10.0.0.1:10256"),
		metrics: metrics, targets: map[discovery.AddressType]time.Time{modelV4: R}}
	if metrics {
		// Its own stream: the seeds' runs stay what they were.
		d.impostor = [...]modelImpostor{modelKubeProxyMetrics, modelKubeProxyMetrics, modelKubeProxyMetrics,
			modelNoStamps, modelOldStamps, modelFarFuture}[rand.New(rand.NewPCG(seed, 0x696d706f73746f72)).IntN(6)]
	}
	res := modelResult{seed: seed, faults: faults, baseline: baseline, tl: tl, metrics: metrics, impostor: d.impostor}
	tl.add(R, "observer", "withdrawn in the API (R); metrics witness %v (impostor %d), baseline %v", metrics, d.impostor, baseline)

	next := asked
	for next.Before(R.Add(modelHorizon)) {
		asked = next
		end := d.poll(asked)
		res.polls++
		if !end.Before(R) {
			v, why := rule.Node(d.n, d.targets)
			alone, _ := rule.Node(d.alone, d.targets)
			m.advance(end.Add(time.Nanosecond))
			tl.add(end, "judge", "%s %s", [...]string{"CONFIRMED", "unverified", "pending"}[v], why)
			if v == NodeConfirmed {
				res.confirmed, res.witness = end, rule.Witness(d.n, d.targets)
				break
			}
			if alone == NodeConfirmed && (rule.For(d.n).Allowance > rule.Allowance || measuredSlowest(d.n) > rule.Allowance-rule.Lag) {
				// The metrics measured a sync longer than D less the
				// watch's skew (one left out of D for having run across
				// a stall included): healthz alone rests on what they
				// refuted.
				res.raised = true
			}
			if alone == NodeConfirmed && res.lost == "" && !res.raised {
				// The same healthz answers without the metrics confirm.
				res.lost = fmt.Sprintf("seed %d: healthz alone confirmed at R%s, with the metrics witness not\n%s", seed, modelOff(R, end), tl)
			}
		}
		next = maxTime(asked.Add(modelPollMin+time.Duration(rng.Int64N(int64(modelPollMax-modelPollMin)+1))), end)
	}
	res.truth, res.unseen = m.truth, m.unseen
	if !res.confirmed.IsZero() && (res.truth.IsZero() || res.truth.After(res.confirmed)) {
		res.violation = fmt.Sprintf("seed %d: confirmed at R%s, but the IPv4 rules dropped the pod at R%s\n%s",
			seed, modelOff(R, res.confirmed), modelOff(R, res.truth), tl)
	}
	if len(res.unseen) > 0 {
		res.violation += fmt.Sprintf("seed %d: model outside the rule's assumptions: %v not seen by any poll\n%s", seed, res.unseen, tl)
	}
	return res
}

// modelRule is the rule's defaults (routing/config.go): the model keeps
// within what it assumes.
var modelRule = Rule{MinSync: time.Second, Allowance: 250 * ms, Lag: 100 * ms}

// modelLate says how a run broke a property, or "": a confirmation
// before the truth (soundness), or, in a run without a fault whose
// baseline answered, none within modelLiveBound (liveness).
func modelLate(res modelResult) string {
	switch {
	case res.violation != "":
		return res.violation
	case res.lost != "":
		return res.lost
	case res.faults == "none" && res.baseline && (res.confirmed.IsZero() || res.confirmed.Sub(res.tl.R) > modelLiveBound):
		return fmt.Sprintf("seed %d: no fault and a baseline, yet not confirmed within %v of R\n%s", res.seed, modelLiveBound, res.tl)
	}
	return ""
}

// TestModelSoundness: thousands of seeds, each sound, and those without
// a fault confirmed in time.
func TestModelSoundness(t *testing.T) {
	seeds := 5000
	if testing.Short() {
		seeds = 300
	}
	type tally struct{ runs, confirmed, byMetrics int }
	count := map[string]*tally{}
	var slowest, latest time.Duration
	impostors, raised := 0, 0
	for seed := range uint64(seeds) {
		res := runModel(seed, modelRule)
		if why := modelLate(res); why != "" {
			t.Fatal(why)
		}
		if res.raised {
			raised++
		}
		c := count[res.faults]
		if c == nil {
			c = &tally{}
			count[res.faults] = c
		}
		c.runs++
		if res.confirmed.IsZero() {
			continue
		}
		c.confirmed++
		if res.witness == WitnessMetrics {
			c.byMetrics++
			if res.impostor != modelKubeProxyMetrics {
				t.Fatalf("seed %d: confirmed by the metrics of a listener that is not kube-proxy (%d)\n%s", seed, res.impostor, res.tl)
			}
		}
		if res.impostor != modelKubeProxyMetrics {
			impostors++
		}
		slowest = max(slowest, res.confirmed.Sub(res.truth))
		if res.faults == "none" {
			latest = max(latest, res.confirmed.Sub(res.tl.R))
		}
	}
	for k, c := range count {
		t.Logf("%-18s %4d runs, %4d confirmed (%d by the metrics witness)", k, c.runs, c.confirmed, c.byMetrics)
	}
	t.Logf("confirmed at most %v after the rules dropped the pod; without a fault at most R+%v", slowest, latest)
	t.Logf("%d confirmed runs had another listener on the metrics port, none confirmed by it", impostors)
	t.Logf("%d runs: healthz alone confirmed first, the metrics having measured a sync longer than D less the watch's skew", raised)
}

// TestModelCatchesWeakRules: the model and its properties can fail. The
// naive rule ("a sync completed after the change holds it": no allowance,
// no lag) and a silence rule that waits for no sync period confirm early;
// a rule that waits 6 s past the change confirms too late.
func TestModelCatchesWeakRules(t *testing.T) {
	for _, tc := range []struct {
		name string
		rule Rule
		want string
	}{
		{"naive", Rule{MinSync: time.Second}, "but the IPv4 rules dropped the pod"},
		{"no sync period", Rule{Allowance: 250 * ms, Lag: 100 * ms}, "but the IPv4 rules dropped the pod"},
		{"too strict", Rule{MinSync: time.Second, Allowance: 6 * time.Second, Lag: 100 * ms}, "not confirmed within"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			found := 0
			for seed := range uint64(300) {
				if why := modelLate(runModel(seed, tc.rule)); strings.Contains(why, tc.want) {
					found++
				}
			}
			t.Logf("%d of 300 seeds break it", found)
			if found == 0 {
				t.Errorf("no seed of 300 found %q", tc.want)
			}
		})
	}
}

// FuzzModel: a seed is a scenario.
func FuzzModel(f *testing.F) {
	for _, s := range []uint64{0, 1, 2, 3, 42} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, seed uint64) {
		if why := modelLate(runModel(seed, modelRule)); why != "" {
			t.Fatal(why)
		}
	})
}

// measuredSlowest is the longest sync n's metrics measured, those that
// ran across a stall (slowestSync leaves them out of D) included.
func measuredSlowest(n *Node) time.Duration {
	var d time.Duration
	if n.metrics != nil {
		for i := range n.metrics.fams {
			for _, s := range n.metrics.fams[i].stamps {
				d = max(d, s.took)
			}
		}
	}
	return d
}
