package routing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/hapsuper/hapsuper/routing/judge"
)

// Observer watches whether anything still routes new connections to this
// pod. Run feeds it from the API and from kube-proxy's healthz; Routing,
// StopRequested and PodGracePeriod may be called from other goroutines.
type Observer struct {
	cfg     Config
	judging judge.Settings // what the verdict follows of cfg
	match   judge.Matcher
	client  API
	clock   clock.WithTicker
	http    *healthzClient
	metrics *metricsClient // kube-proxy's /metrics, with cfg.MetricsPort
	log     *slog.Logger
	kick    chan struct{} // StopRequested and the pod's deletion ask Run for a round now

	mu        sync.Mutex
	synced    bool      // the slice and Service watches delivered their initial lists
	stopAt    time.Time // zero until the drain starts
	watch     watchState
	nodes     map[string]*judge.Node // nil until the node list is read
	nodesErr  string                 // why the node list could not be read
	leftNodes map[string]string      // node → why it left the set (deleted, NotReady)
	listedAt  time.Time              // when the node list was last read
	conns     *connSet               // open healthz connections, per node address
	asked     askedTimes             // when each node was last asked (schedule.go)
	baseline  baselineQueue          // the next baseline polls while serving (baseline.go)
	drainSeen time.Time              // when a round first saw the drain started (relistDue)
	// proofAt is the next instant Run starts a round at, between its
	// ticks (schedule.go's wakeAt): a pending node's first proof
	// (noteProof) or its next ask while it awaits a stamp (noteRestart);
	// proofTargets is the withdrawal the proofs are judged against, nil
	// without the metrics witness or with many nodes.
	proofAt      time.Time
	proofTargets map[discovery.AddressType]time.Time
	// restartWatch are the pending nodes the last round found awaiting a
	// stamp (judge.Node.AwaitsStamp), asked every restartPollEvery, at
	// most restartWatchNodes (schedule.go's noteRestart).
	restartWatch []*judge.Node
	// metricsBusy holds the nodes whose metrics request is in flight;
	// metricsOff those whose metrics port refused or did not answer in
	// time, not asked for their metrics again (readMetrics);
	// metricsTimedOut those whose metrics did not answer in time, since
	// when: asked again once healthz shows the node stalled meanwhile
	// (startMetrics).
	metricsBusy, metricsOff map[*judge.Node]bool
	metricsTimedOut         map[*judge.Node]time.Time
	// metricsSlots bounds the metrics requests in flight; witnessing
	// counts their goroutines, which Run waits for before it returns.
	metricsSlots chan struct{}
	witnessing   sync.WaitGroup
	// inFlight holds the nodes a drain round's poll was started for and
	// has not returned: a round does not ask them again (confirmTodo).
	// pollSlots bounds those polls, Concurrency across rounds; polling
	// counts their goroutines, which Run waits for before it returns
	// (scheduledRound: a drain's poll may outlast its round).
	inFlight  map[*judge.Node]bool
	pollSlots chan struct{}
	polling   sync.WaitGroup
	// balancing: a balancers' round runs (rounds), counted in polling.
	balancing atomic.Bool
	// balancerAt is when Run last asked the balancers' health checks
	// (rounds); Run's goroutine only.
	balancerAt time.Time

	// lbNodeChecks are the load balancers' health checks of the pod's
	// node (its Services' healthCheckNodePorts), as answered.
	lbNodeChecks map[judge.CheckKey]*judge.CheckState
}

// New builds an Observer on the real clock and network. client may be nil
// only in ModeOff.
func New(cfg Config, client API, log *slog.Logger) (*Observer, error) {
	return newObserver(cfg, client, clock.RealClock{}, pollDialer.DialContext, log)
}

// pollDialer opens the connections of the polls: without TCP keep-alive
// probes, which a connection kept for the seconds of a drain never sends
// and whose four setsockopt calls per dial were a tenth of a poll's CPU at
// thousands of nodes.
var pollDialer = &net.Dialer{KeepAlive: -1}

// newObserver is New with the clock and the dialer injected.
func newObserver(cfg Config, client API, clk clock.WithTicker, dial dialFunc, log *slog.Logger) (*Observer, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.Mode != ModeOff && client == nil {
		return nil, errors.New("start routing observer: no Kubernetes client: run in a pod with a service account, or use routing mode off")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	addrs, _ := cfg.Identity.addrs()
	conns := &connSet{}
	// An idle connection per pending node is kept for the next round
	// (closed once the node confirmed). Keeping none cost more: a dial per
	// poll slowed the rounds, and confirmation, under load.
	hc := newHealthzClient(conns.track(dial), cfg.RequestTimeout/2)
	hc.now = clk.Now
	return &Observer{
		cfg: cfg,
		judging: judge.Settings{
			KubeProxy: cfg.Mode == ModeKubeProxy,
			Namespace: cfg.Identity.Namespace,
			Node:      cfg.Identity.NodeName,
			Rule:      judge.Rule{MinSync: cfg.MinSyncPeriod, Allowance: cfg.SyncAllowance, Lag: cfg.lag()},

			LoadBalancerDelay:   cfg.LoadBalancerDelay,
			LBHealthCheckWindow: cfg.LBHealthCheckWindow,
			PodChecked:          cfg.PodChecked,
		},
		match:   judge.Matcher{PodName: cfg.Identity.PodName, Addrs: addrs},
		client:  client,
		clock:   clk,
		http:    hc,
		metrics: &metricsClient{dial: conns.track(dial), dialTimeout: cfg.MetricsTimeout, now: clk.Now},
		conns:   conns,
		log:     log.With("component", "routing"),
		kick:    make(chan struct{}, 1),
		asked:   askedTimes{epoch: clk.Now(), at: map[*judge.Node]time.Duration{}},

		metricsBusy:     map[*judge.Node]bool{},
		metricsOff:      map[*judge.Node]bool{},
		metricsTimedOut: map[*judge.Node]time.Time{},
		metricsSlots:    make(chan struct{}, cfg.Concurrency),
		inFlight:        map[*judge.Node]bool{},
		pollSlots:       make(chan struct{}, cfg.Concurrency),
		watch: watchState{
			services:  map[string]*corev1.Service{},
			slices:    map[string]*storedSlice{},
			byService: map[string][]*storedSlice{},
			paths:     map[judge.PathKey]*judge.Path{},
		},
	}, nil
}

// StopRequested tells the observer that the drain started at now. From then
// on, in ModeKubeProxy, it asks kube-proxy to confirm the API's verdict.
func (o *Observer) StopRequested(now time.Time) {
	o.mu.Lock()
	if o.stopAt.IsZero() {
		o.stopAt = now
	}
	o.mu.Unlock()
	o.kickRound()
}

// kickRound asks Run for a round now.
func (o *Observer) kickRound() {
	select {
	case o.kick <- struct{}{}:
	default:
	}
}

// PodGracePeriod is the pod's deletionGracePeriodSeconds once the watch saw
// the pod being deleted.
func (o *Observer) PodGracePeriod() (time.Duration, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.watch.grace == nil {
		return 0, false
	}
	return time.Duration(*o.watch.grace) * time.Second, true
}

// nodeListTimeout bounds the node list; a list of thousands of nodes from
// the watch cache takes well under a second.
const nodeListTimeout = 10 * time.Second

// Run watches until ctx ends, then returns nil. The watches run for the
// pod's whole life so the cache is warm when the stop comes; healthz rounds
// run every tickEvery once the stop is requested or the watch sees the
// pod's deletion, whichever comes first (confirmRound), each asking the
// nodes due before the next (schedule.go). Run returns an error only when
// it cannot start its watches.
func (o *Observer) Run(ctx context.Context) error {
	if o.cfg.Mode == ModeOff {
		<-ctx.Done()
		return nil
	}
	ns := o.cfg.Identity.Namespace
	sliceInf, err := namespaceInformer(o.client, ns, &discovery.EndpointSlice{}, o.client.ListEndpointSlices, o.client.WatchEndpointSlices, o.transform)
	if err != nil {
		return err
	}
	svcInf, err := namespaceInformer(o.client, ns, &corev1.Service{}, o.client.ListServices, o.client.WatchServices, o.transform)
	if err != nil {
		return err
	}
	podInf, err := o.ownPodInformer()
	if err != nil {
		return err
	}
	var informing sync.WaitGroup
	defer informing.Wait()
	defer o.http.CloseIdleConnections()
	defer o.metrics.CloseIdleConnections()
	defer o.witnessing.Wait() // after cancel: each ends with its request
	defer o.polling.Wait()    // before witnessing's: a poll may start a metrics read
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // before the Wait, which waits for the informers to stop

	sliceReg, err := o.inform(sliceInf, "endpointslices", o.applySlice)
	if err != nil {
		return err
	}
	svcReg, err := o.inform(svcInf, "services", o.applyService)
	if err != nil {
		return err
	}
	if _, err := o.inform(podInf, "pods", o.applyPod); err != nil {
		return err
	}
	for _, inf := range []cache.SharedIndexInformer{sliceInf, svcInf, podInf} {
		informing.Go(func() { inf.RunWithContext(ctx) })
	}
	if !cache.WaitForCacheSync(ctx.Done(), sliceReg.HasSynced, svcReg.HasSynced) {
		return nil
	}
	o.mu.Lock()
	o.synced, o.watch.watchErr = true, ""
	paths := len(o.watch.paths)
	o.mu.Unlock()
	o.log.Info("routing watch synced", "namespace", ns, "pod", o.cfg.Identity.PodName, "paths", paths)
	if o.baselineOn() {
		o.log.Info("kube-proxy baseline while serving: every node's healthz asked once a period, on one kept connection a node",
			"period", o.cfg.BaselinePeriod, "max_nodes_per_second", baselineRate)
	}
	// Decoding the initial lists leaves idle heap (tens of MB in a
	// namespace of thousands of slices) that the runtime would hand back to
	// the OS only over minutes: return it now, once, for a few ms.
	debug.FreeOSMemory()

	// A round every roundEvery from the start of the one before, as a
	// ticker would tick (a round that outlasts it is followed at once),
	// with the period the state asks for: a second while the pod serves,
	// the poll interval from the drain on.
	wait := o.clock.NewTimer(o.roundEvery())
	defer wait.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-wait.C():
		case <-o.kick:
		}
		start := o.clock.Now()
		again := o.rounds(ctx)
		wait.Stop()
		if again {
			wait.Reset(0)
		} else {
			wait.Reset(o.untilNextRound(start))
		}
	}
}

// inform registers the observer's handler and watch-error hook on an
// informer that has not started.
func (o *Observer) inform(inf cache.SharedIndexInformer, resource string, apply func(any, bool, time.Time)) (cache.ResourceEventHandlerRegistration, error) {
	if err := inf.SetWatchErrorHandler(o.watchError(resource)); err != nil {
		return nil, fmt.Errorf("watch %s in namespace %s: %w", resource, o.cfg.Identity.Namespace, err)
	}
	reg, err := inf.AddEventHandler(o.handlers(apply))
	if err != nil {
		return nil, fmt.Errorf("watch %s in namespace %s: %w", resource, o.cfg.Identity.Namespace, err)
	}
	return reg, nil
}
