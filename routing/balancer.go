package routing

// The external path of a Service with externalTrafficPolicy Local. A cloud
// load balancer in front of such a Service sends to every node that passes
// its health check of the Service's healthCheckNodePort, which kube-proxy
// serves: 200 while the node has a ready local endpoint, 503 with
// localEndpoints 0 once it has none, while its rules still forward to the
// serving-terminating ones (KEP-1669). When this pod is the node's last
// ready endpoint, the node's external traffic keeps coming to it until the
// balancer marks the node down, one health-check window after the check
// began to fail. That window is the balancer's setting, read from the
// Service's annotations where the provider documents them, else given as
// --lb-health-check-window; unknown, the path stays pending (the bound).
//
// The observer asks the node's health check itself, as the balancer does,
// from the stop on, every poll interval: the window counts from the first
// answer of an unbroken run of failing ones (a 200, or an answer that is
// not kube-proxy's, starts it again). An error is not a failure: the
// balancer may still see 200.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/hapsuper/hapsuper/drain"
)

// Service annotations of the providers that document their health check's
// interval and unhealthy threshold on the Service.
const (
	annotationAWSInterval    = "service.beta.kubernetes.io/aws-load-balancer-healthcheck-interval"
	annotationAWSThreshold   = "service.beta.kubernetes.io/aws-load-balancer-healthcheck-unhealthy-threshold"
	annotationAzureInterval  = "service.beta.kubernetes.io/azure-load-balancer-health-probe-interval"
	annotationAzureThreshold = "service.beta.kubernetes.io/azure-load-balancer-health-probe-num-of-probe"
)

// windowAnnotations are the interval and threshold annotations, per provider.
var windowAnnotations = []struct{ provider, interval, threshold string }{
	{"AWS", annotationAWSInterval, annotationAWSThreshold},
	{"Azure", annotationAzureInterval, annotationAzureThreshold},
}

// WindowSetting names the setting that gives the window when the Service
// does not.
const WindowSetting = "--lb-health-check-window"

// balancerPath is what the external path of one Service needs: the node's
// health check port. The window is read when the verdict is made, from the
// Service then seen and the setting.
type balancerPath struct {
	port int32 // spec.healthCheckNodePort
}

// externalCheck is the balancer path of a Service whose external traffic
// falls back to this pod on its node, or nil when nothing observable tells a
// balancer to stop (no healthCheckNodePort: a NodePort Service, externalIPs).
func externalCheck(svc *corev1.Service) *balancerPath {
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer || svc.Spec.HealthCheckNodePort == 0 {
		return nil
	}
	return &balancerPath{port: svc.Spec.HealthCheckNodePort}
}

// healthCheckWindow is the longest a balancer takes to stop sending once
// its health check of the node fails: interval × unhealthy threshold, plus
// one interval for the check under way, from the Service's annotations;
// else the flag; else 0, with why.
func healthCheckWindow(ann map[string]string, flag time.Duration) (time.Duration, string) {
	var problems []string
	for _, a := range windowAnnotations {
		iv, hasI := ann[a.interval]
		th, hasT := ann[a.threshold]
		if !hasI && !hasT {
			continue
		}
		i, errI := strconv.Atoi(strings.TrimSpace(iv))
		n, errT := strconv.Atoi(strings.TrimSpace(th))
		switch {
		case !hasI || !hasT:
			problems = append(problems, fmt.Sprintf("%s annotations give only one of interval and threshold", a.provider))
		case errI != nil || errT != nil || i < 1 || n < 1 || i > 3600 || n > 100:
			problems = append(problems, fmt.Sprintf("%s annotations %q and %q are not whole seconds and a count", a.provider, iv, th))
		default:
			w := time.Duration(i*n+i) * time.Second
			return w, fmt.Sprintf("%s annotations: interval %ds × threshold %d + %ds", a.provider, i, n, i)
		}
	}
	if flag > 0 {
		src := WindowSetting
		if len(problems) > 0 {
			src += " (" + strings.Join(problems, "; ") + ")"
		}
		return flag, src
	}
	why := "unknown: set " + WindowSetting + " to the balancer's health-check interval × unhealthy threshold + one interval, or its Service annotations"
	if len(problems) > 0 {
		why = strings.Join(problems, "; ") + "; " + why
	}
	return 0, why
}

// checkKey is one health check hapsuper asks: the node's address and port.
type checkKey struct {
	addr netip.Addr
	port int32
}

func (k checkKey) url() string {
	return "http://" + netip.AddrPortFrom(k.addr, uint16(k.port)).String() + "/"
}

// checkState is what the node's health check answered.
type checkState struct {
	failingSince time.Time // receipt of the first of the current run of failing answers; zero: not failing
	answer       string    // the last answer or error, for the detail
}

// serviceHealth is kube-proxy's answer on a healthCheckNodePort
// (pkg/proxy/healthcheck/service_health.go).
type serviceHealth struct {
	Service struct {
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
	} `json:"service"`
	LocalEndpoints *int `json:"localEndpoints"`
}

// readServiceHealth says whether an answer is the failing check of Service
// namespace/name: kube-proxy's 503 with no local endpoint. answer describes
// it for the detail.
func readServiceHealth(status int, body []byte, namespace, name string) (failing bool, answer string) {
	var h serviceHealth
	if err := json.Unmarshal(body, &h); err != nil || h.LocalEndpoints == nil {
		return false, fmt.Sprintf("HTTP %d, not kube-proxy's service health check", status)
	}
	if h.Service.Namespace != namespace || h.Service.Name != name {
		return false, fmt.Sprintf("HTTP %d for Service %s/%s, not %s/%s", status, clip(h.Service.Namespace), clip(h.Service.Name), namespace, name)
	}
	answer = fmt.Sprintf("HTTP %d, localEndpoints %d", status, *h.LocalEndpoints)
	return status == http.StatusServiceUnavailable && *h.LocalEndpoints == 0, answer
}

// clip bounds a string from the network in a detail.
func clip(s string) string {
	const max = 64
	if len(s) > max {
		return strconv.Quote(s[:max]) + "…"
	}
	return s
}

// balancerTargets are the health checks the external paths need asked,
// and the pod's node address they go to. Called with o.mu held.
func (o *Observer) balancerTargets() (map[checkKey][]string, string) {
	out := map[checkKey][]string{}
	for k, p := range o.watch.paths {
		if !p.withdrawn || p.balancer == nil {
			continue
		}
		if !o.watch.hostIP.IsValid() {
			return nil, "the pod's hostIP is not known yet"
		}
		ck := checkKey{addr: o.watch.hostIP, port: p.balancer.port}
		if !slices.Contains(out[ck], k.service) {
			out[ck] = append(out[ck], k.service)
		}
	}
	return out, ""
}

// balancerRound asks each health check an external path needs, once the
// stop is requested, at most Concurrency at a time. It returns when every
// request has ended, each within RequestTimeout.
func (o *Observer) balancerRound(ctx context.Context) {
	o.mu.Lock()
	if o.cfg.Mode == ModeOff || !o.synced || o.stopAt.IsZero() {
		o.mu.Unlock()
		return
	}
	targets, _ := o.balancerTargets()
	for k := range o.checks {
		if _, ok := targets[k]; !ok {
			delete(o.checks, k) // no longer needed: a later need starts afresh
		}
	}
	o.mu.Unlock()
	keys := make([]checkKey, 0, len(targets))
	for k := range targets {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b checkKey) int { return strings.Compare(a.url(), b.url()) })
	fanOut(ctx, o.cfg.Concurrency, keys, func(k checkKey) { o.pollCheck(ctx, k, targets[k][0]) })
}

// pollCheck asks one health check and records the answer.
func (o *Observer) pollCheck(ctx context.Context, k checkKey, service string) {
	rctx, cancel := context.WithTimeout(ctx, o.cfg.RequestTimeout)
	addr := netip.AddrPortFrom(k.addr, uint16(k.port)).String()
	status, body, err := o.http.getPath(rctx, addr, "/")
	cancel()
	if ctx.Err() != nil {
		return // shutting down
	}
	now := o.clock.Now()
	failing, answer := false, ""
	if err != nil {
		answer = "no answer: " + classify(addr, err, o.cfg.RequestTimeout).msg
	} else {
		failing, answer = readServiceHealth(status, body, o.cfg.Identity.Namespace, service)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.checks == nil {
		o.checks = map[checkKey]*checkState{}
	}
	st := o.checks[k]
	if st == nil {
		st = &checkState{}
		o.checks[k] = st
	}
	switch {
	case failing && st.failingSince.IsZero():
		st.failingSince = now
		o.log.Info("load balancer health check of the node failing", "service", service, "url", k.url(), "answer", answer)
	case !failing && !st.failingSince.IsZero():
		// A balancer counts consecutive failures: an answer that is not
		// one, or none at all, may have reset its count.
		st.failingSince = time.Time{}
		o.log.Info("load balancer health check of the node no longer seen failing", "service", service, "url", k.url(), "answer", answer)
	}
	st.answer = answer
}

// balancerVerdict holds a verdict that would let the drain end while an
// external path still sends here: pending until, for every withdrawn path
// with a balancer, the node's health check has been seen failing for the
// balancer's window. Once all have, a withdrawn verdict says Balancer.
// Called with o.mu held.
func (o *Observer) balancerVerdict(r drain.Routing, now time.Time) drain.Routing {
	if r.State == drain.RoutingPending {
		return r
	}
	keys := make([]pathKey, 0)
	for k, p := range o.watch.paths {
		if p.withdrawn && p.balancer != nil {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return r
	}
	slices.SortFunc(keys, func(a, b pathKey) int { return strings.Compare(a.String(), b.String()) })
	node := o.cfg.Identity.NodeName
	var pending, met []string
	seen := map[string]bool{}
	for _, k := range keys {
		if seen[k.service] {
			continue // one check per Service, whatever the family
		}
		seen[k.service] = true
		b := o.watch.paths[k].balancer
		var ann map[string]string
		if svc := o.watch.services[k.service]; svc != nil {
			ann = svc.Annotations
		}
		window, source := healthCheckWindow(ann, o.cfg.LBHealthCheckWindow)
		name := o.cfg.Identity.Namespace + "/" + k.service
		if !o.watch.hostIP.IsValid() {
			pending = append(pending, name+": the pod's hostIP is not known yet")
			continue
		}
		ck := checkKey{addr: o.watch.hostIP, port: b.port}
		st := o.checks[ck]
		switch {
		case st == nil:
			pending = append(pending, fmt.Sprintf("%s: health check %s not asked yet", name, ck.url()))
		case st.failingSince.IsZero():
			pending = append(pending, fmt.Sprintf("%s: health check %s not failing (%s)", name, ck.url(), st.answer))
		case window <= 0:
			pending = append(pending, fmt.Sprintf("%s: health check %s failing for %s; the load balancer's window is %s",
				name, ck.url(), ago(now, st.failingSince), source))
		case now.Before(st.failingSince.Add(window)):
			pending = append(pending, fmt.Sprintf("%s: health check %s failing for %s; the load balancer marks the node down within %v (%s): %s more",
				name, ck.url(), ago(now, st.failingSince), window, source, st.failingSince.Add(window).Sub(now).Round(time.Millisecond)))
		default:
			met = append(met, fmt.Sprintf("%s: health check %s failing for %s (%s), window %v (%s) passed",
				name, ck.url(), ago(now, st.failingSince), st.answer, window, source))
		}
	}
	if len(pending) > 0 {
		return drain.Routing{State: drain.RoutingPending, PendingNodes: r.PendingNodes, Detail: fmt.Sprintf(
			"%s; external traffic to node %s (externalTrafficPolicy Local, no other ready pod there) still comes here until the load balancer marks the node down: %s",
			r.Detail, node, named(pending))}
	}
	r.Detail += fmt.Sprintf("; external path via node %s withdrawn by the load balancer: %s", node, named(met))
	if r.State == drain.RoutingWithdrawn {
		r.Balancer = true
	}
	return r
}

// ago formats now-t in seconds with one decimal.
func ago(now, t time.Time) string { return fmt.Sprintf("%.1fs", now.Sub(t).Seconds()) }
