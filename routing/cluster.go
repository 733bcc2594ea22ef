package routing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/hapsuper/hapsuper/conf"
	"github.com/hapsuper/hapsuper/drain"
	"github.com/hapsuper/hapsuper/routing/kube"
)

// Cluster is hapsuper's one boundary with the Kubernetes API: the routing
// observer (the verdict and the pod's grace period) and the announcer of a
// drain's end as an Event on the pod. Open builds it from the settings;
// nothing else in the running PID 1 talks to the apiserver (`hapsuper
// check`, a command of its own, builds its client with routing/kube too).
type Cluster struct {
	mode     Mode
	observer *Observer  // nil when off
	announce *announcer // nil when off
	log      *slog.Logger
	client   API      // nil when off
	pod      Identity // empty when off
}

// Open builds the routing observation for the settings' mode, before
// HAProxy starts. Mode off, and auto without credentials or pod identity
// (said in the log), give a Cluster that observes nothing (Observed false).
// An explicit mode that cannot work is an error.
func Open(s conf.Settings, log *slog.Logger) (*Cluster, error) {
	off := &Cluster{mode: ModeOff, log: log}
	mode := s.Routing
	explicit := mode != conf.RoutingAuto
	if mode == conf.RoutingOff {
		if s.LBDeregistrationDelay > 0 {
			log.Warn("--lb-deregistration-delay has no effect with --routing off: no withdrawal is observed")
		}
		if s.LBHealthCheckWindow > 0 {
			log.Warn("--lb-health-check-window has no effect with --routing off: no load balancer is observed")
		}
		return off, nil
	}
	cfg, credsErr := RESTConfig(s.Kubeconfig)
	id, idErr := IdentityFromEnv(os.Getenv)
	if credsErr != nil && s.Kubeconfig != "" {
		// Given explicitly: a path that cannot be read is a mistake to
		// report, not a reason to run blind.
		return nil, fmt.Errorf("read --kubeconfig %s: %w: fix the path or drop --kubeconfig", s.Kubeconfig, credsErr)
	}
	if !explicit {
		if credsErr != nil {
			log.Info("routing observation off: no in-cluster credentials and no --kubeconfig; the quiet period decides", "why", credsErr.Error())
			return off, nil
		}
		if idErr != nil {
			log.Warn("routing observation off: the pod's identity is missing; the quiet period decides", "err", idErr)
			return off, nil
		}
	}
	if credsErr != nil {
		return nil, fmt.Errorf("--routing %s needs in-cluster credentials or --kubeconfig: %w", mode, credsErr)
	}
	if idErr != nil {
		return nil, fmt.Errorf("--routing %s: %w", mode, idErr)
	}
	client, err := kube.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	if !explicit {
		ctx, cancel := context.WithTimeout(context.Background(), pickModeTimeout)
		picked, why := PickMode(ctx, client, id, s.KubeProxyHealthzPort)
		cancel()
		mode = string(picked)
		log.Info("routing mode picked", "mode", mode, "why", why)
	}
	if s.LBDeregistrationDelay > 0 {
		log.Info("drains hold for load balancers after the withdrawal", "lb-deregistration-delay", s.LBDeregistrationDelay.String())
	}
	obs, err := New(Config{
		Mode:                Mode(mode),
		Identity:            id,
		HealthzPort:         s.KubeProxyHealthzPort,
		MetricsPort:         s.KubeProxyMetricsPort,
		MinSyncPeriod:       s.KubeProxyMinSyncPeriod,
		SyncAllowance:       s.KubeProxySyncAllowance,
		MinPollInterval:     FastPollInterval,
		BaselinePeriod:      s.KubeProxyBaselinePeriod,
		LoadBalancerDelay:   s.LBDeregistrationDelay,
		LBHealthCheckWindow: s.LBHealthCheckWindow,
		PodChecked:          s.LBCheckBind != "",
	}, client, log) // the observer names its own component
	if err != nil {
		return nil, err
	}
	log.Info("routing observation on", "mode", mode, "pod", id.Namespace+"/"+id.PodName, "node", id.NodeName)
	return &Cluster{
		mode:     Mode(mode),
		observer: obs,
		announce: newAnnouncer(client, id, log.With("component", "event")),
		log:      log,
		client:   client,
		pod:      id,
	}, nil
}

// RESTConfig reads the kubeconfig when one is given, otherwise the pod's
// service account: the credentials run and check both use.
func RESTConfig(kubeconfig string) (*rest.Config, error) {
	var cfg *rest.Config
	var err error
	if kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("read kubeconfig %s: %w", kubeconfig, err)
		}
	} else if cfg, err = rest.InClusterConfig(); err != nil {
		return nil, err
	}
	cfg.UserAgent = "hapsuper"
	cfg.QPS, cfg.Burst = 5, 10 // a few lists and watches: keep off the apiserver's back
	return cfg, nil
}

// Mode is the mode the Cluster runs in (auto resolved).
func (c *Cluster) Mode() Mode { return c.mode }

// Observed says whether anything is observed: false in ModeOff.
func (c *Cluster) Observed() bool { return c.observer != nil }

// Routing is the verdict at now.
func (c *Cluster) Routing(now time.Time) drain.Routing { return c.observer.Routing(now) }

// StopRequested tells the observer that the drain started at now.
func (c *Cluster) StopRequested(now time.Time) { c.observer.StopRequested(now) }

// PodGracePeriod is the pod's deletionGracePeriodSeconds once the watch
// saw the pod being deleted.
func (c *Cluster) PodGracePeriod() (time.Duration, bool) { return c.observer.PodGracePeriod() }

// PodDeleting reads the pod from the apiserver, not from the watch, and
// says whether it is being deleted, with its deletion grace period: for a
// question that must not wait for the watch (a sidecar's gate asked by the
// kubelet's preStop, which may come before the watch delivered the
// deletion). Bounded by podReadTimeout; an error when nothing is observed.
func (c *Cluster) PodDeleting(ctx context.Context) (deleting bool, grace time.Duration, err error) {
	if c.client == nil {
		return false, 0, errors.New("read the pod: routing observation off")
	}
	ctx, cancel := context.WithTimeout(ctx, podReadTimeout)
	defer cancel()
	pod, err := c.client.GetPod(ctx, c.pod.Namespace, c.pod.PodName)
	if err != nil {
		return false, 0, fmt.Errorf("read pod %s/%s: %w", c.pod.Namespace, c.pod.PodName, err)
	}
	if pod.DeletionTimestamp == nil {
		return false, 0, nil
	}
	if pod.DeletionGracePeriodSeconds != nil {
		grace = time.Duration(*pod.DeletionGracePeriodSeconds) * time.Second
	}
	return true, grace, nil
}

// DrainEnded reports the end of the drain as an Event on the pod, without
// blocking: Run posts it.
func (c *Cluster) DrainEnded(st drain.Status) { c.announce.drainEnded(st) }

// Run watches and announces until ctx ends. A failed observer is logged and
// never ends Run early: routing then reads as not observed, and the drain
// still has the quiet period and the bound.
//
// Once ctx ends it waits at most stopWait for the observer: client-go
// (v0.37.2) sleeps out a watch-list retry backoff, up to a minute with
// jitter, without looking at its stop channel, and an apiserver that cannot
// be reached must not keep hapsuper alive after HAProxy exited (measured:
// 4-6 s, and past the grace period with a longer outage). The observer's
// goroutine is then left to the process's exit.
func (c *Cluster) Run(ctx context.Context) error {
	if c.observer == nil {
		<-ctx.Done()
		return nil
	}
	var announcing sync.WaitGroup
	announcing.Go(func() { c.announce.run(ctx) }) // returns within eventExitWait of ctx's end
	defer announcing.Wait()
	done := make(chan error, 1)
	go func() { done <- c.observer.Run(ctx) }()
	select {
	case err := <-done:
		if err != nil && !errors.Is(err, context.Canceled) {
			c.log.Error("routing observation stopped: drains fall back to the quiet period", "err", err)
			<-ctx.Done()
		}
	case <-ctx.Done():
		select {
		case <-done:
		case <-time.After(stopWait):
			c.log.Warn("routing watch did not stop in time: exiting without it", "waited", stopWait.String())
		}
	}
	return nil
}

// pickModeTimeout bounds auto's probe of the node list and this node's
// kube-proxy healthz at start (PickMode bounds itself too).
const pickModeTimeout = 5 * time.Second

// podReadTimeout bounds PodDeleting's read of the pod.
const podReadTimeout = 2 * time.Second

// stopWait bounds the wait for the routing watch once hapsuper stops.
const stopWait = 500 * time.Millisecond
