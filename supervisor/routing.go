package supervisor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/hapsuper/hapsuper/conf"
	"github.com/hapsuper/hapsuper/drain"
	"github.com/hapsuper/hapsuper/routing"
)

// routingObserver is what the loop needs of routing/.
type routingObserver interface {
	Routing(now time.Time) drain.Routing
	StopRequested(now time.Time)
	PodGracePeriod() (time.Duration, bool)
}

// routingSetup is what the routing modes bring: the observer, and the
// announcer of the drain's end as an Event on the pod.
type routingSetup struct {
	mode     routing.Mode
	observer *routing.Observer // nil when off
	announce *announcer        // nil when off
}

// newRouting builds the routing observer for the settings' mode. Mode off,
// and auto without credentials or pod identity (said in the log), give a
// setup without observer. An explicit mode that cannot work is an error,
// before HAProxy starts.
func newRouting(s conf.Settings, log *slog.Logger) (routingSetup, error) {
	off := routingSetup{mode: routing.ModeOff}
	mode := s.Routing
	explicit := mode != conf.RoutingAuto
	if mode == conf.RoutingOff {
		if s.LBDeregistrationDelay > 0 {
			log.Warn("--lb-deregistration-delay has no effect with --routing off: no withdrawal is observed")
		}
		return off, nil
	}
	cfg, credsErr := restConfig(s.Kubeconfig)
	id, idErr := routing.IdentityFromEnv(os.Getenv)
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
		return off, fmt.Errorf("--routing %s needs in-cluster credentials or --kubeconfig: %w", mode, credsErr)
	}
	if idErr != nil {
		return off, fmt.Errorf("--routing %s: %w", mode, idErr)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return off, fmt.Errorf("build a Kubernetes client: %w", err)
	}
	if !explicit {
		ctx, cancel := context.WithTimeout(context.Background(), pickModeTimeout)
		picked, why := routing.PickMode(ctx, client, id, s.KubeProxyHealthzPort)
		cancel()
		mode = string(picked)
		log.Info("routing mode picked", "mode", mode, "why", why)
	}
	if s.LBDeregistrationDelay > 0 {
		log.Info("drains hold for load balancers after the withdrawal", "lb-deregistration-delay", s.LBDeregistrationDelay.String())
	}
	obs, err := routing.New(routing.Config{
		Mode:              routing.Mode(mode),
		Identity:          id,
		HealthzPort:       s.KubeProxyHealthzPort,
		MinSyncPeriod:     s.KubeProxyMinSyncPeriod,
		SyncAllowance:     s.KubeProxySyncAllowance,
		LoadBalancerDelay: s.LBDeregistrationDelay,
	}, client, log) // the observer names its own component
	if err != nil {
		return off, err
	}
	log.Info("routing observation on", "mode", mode, "pod", id.Namespace+"/"+id.PodName, "node", id.NodeName)
	return routingSetup{
		mode:     routing.Mode(mode),
		observer: obs,
		announce: newAnnouncer(client, id, log.With("component", "event")),
	}, nil
}

// restConfig reads the kubeconfig when one is given, otherwise the pod's
// service account.
func restConfig(kubeconfig string) (*rest.Config, error) {
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

// routingActor runs the observer for the life of the supervisor. A failed
// observer is logged and never ends the group: routing then reads as not
// observed, and the drain still has the quiet period and the bound.
//
// Once ctx ends it waits at most routingStopWait for the observer: client-go
// (v0.37.2) sleeps out a watch-list retry backoff, up to a minute with
// jitter, without looking at its stop channel, and an apiserver that cannot
// be reached must not keep hapsuper alive after HAProxy exited (measured:
// 4-6 s, and past the grace period with a longer outage). The observer's
// goroutine is then left to the process's exit.
func routingActor(obs *routing.Observer, log *slog.Logger) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		done := make(chan error, 1)
		go func() { done <- obs.Run(ctx) }()
		select {
		case err := <-done:
			if err != nil && !errors.Is(err, context.Canceled) {
				log.Error("routing observation stopped: drains fall back to the quiet period", "err", err)
				<-ctx.Done()
			}
		case <-ctx.Done():
			select {
			case <-done:
			case <-time.After(routingStopWait):
				log.Warn("routing watch did not stop in time: exiting without it", "waited", routingStopWait.String())
			}
		}
		return nil
	}
}

// pickModeTimeout bounds auto's probe of the node list and this node's
// kube-proxy healthz at start (routing.PickMode bounds itself too).
const pickModeTimeout = 5 * time.Second

// routingStopWait bounds the wait for the routing watch once hapsuper stops.
const routingStopWait = 500 * time.Millisecond
