package judge

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
	"encoding/json"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Service annotations of the providers that document their health check's
// interval and unhealthy threshold on the Service.
const (
	AnnotationAWSInterval    = "service.beta.kubernetes.io/aws-load-balancer-healthcheck-interval"
	AnnotationAWSThreshold   = "service.beta.kubernetes.io/aws-load-balancer-healthcheck-unhealthy-threshold"
	AnnotationAzureInterval  = "service.beta.kubernetes.io/azure-load-balancer-health-probe-interval"
	AnnotationAzureThreshold = "service.beta.kubernetes.io/azure-load-balancer-health-probe-num-of-probe"
)

// windowAnnotations are the interval and threshold annotations, per provider.
var windowAnnotations = []struct{ provider, interval, threshold string }{
	{"AWS", AnnotationAWSInterval, AnnotationAWSThreshold},
	{"Azure", AnnotationAzureInterval, AnnotationAzureThreshold},
}

// WindowSetting names the setting that gives the window when the Service
// does not.
const WindowSetting = "--lb-health-check-window"

// BalancerPath is what the external path of one Service needs: the node's
// health check port. The window is read when the verdict is made, from the
// Service then seen and the setting.
type BalancerPath struct {
	Port int32 // spec.healthCheckNodePort
}

// externalCheck is the balancer path of a Service whose external traffic
// falls back to this pod on its node, or nil when nothing observable tells a
// balancer to stop (no healthCheckNodePort: a NodePort Service, externalIPs).
func externalCheck(svc *corev1.Service) *BalancerPath {
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer || svc.Spec.HealthCheckNodePort == 0 {
		return nil
	}
	return &BalancerPath{Port: svc.Spec.HealthCheckNodePort}
}

// HealthCheckWindow is the longest a balancer takes to stop sending once
// its health check of the node fails: interval × unhealthy threshold, plus
// one interval for the check under way, from the Service's annotations;
// else the flag; else 0, with why.
func HealthCheckWindow(ann map[string]string, flag time.Duration) (time.Duration, string) {
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

// CheckKey is one health check hapsuper asks: the node's address and port.
type CheckKey struct {
	Addr netip.Addr
	Port int32
}

// AddrPort is where the check is asked.
func (k CheckKey) AddrPort() netip.AddrPort { return netip.AddrPortFrom(k.Addr, uint16(k.Port)) }

// URL is the check as the balancer asks it.
func (k CheckKey) URL() string { return "http://" + k.AddrPort().String() + "/" }

// CheckState is what the node's health check answered.
type CheckState struct {
	FailingSince time.Time // receipt of the first of the current run of failing answers; zero: not failing
	Answer       string    // the last answer or error, for the detail
}

// Saw records an answer received at now: failing or not, as
// ReadServiceHealth (or an error: not failing) said. A balancer counts
// consecutive failures: an answer that is not one, or none at all, may
// have reset its count. It says whether the run of failing answers began
// (began) or ended (ended) with this one.
func (st *CheckState) Saw(failing bool, answer string, now time.Time) (began, ended bool) {
	switch {
	case failing && st.FailingSince.IsZero():
		st.FailingSince, began = now, true
	case !failing && !st.FailingSince.IsZero():
		st.FailingSince, ended = time.Time{}, true
	}
	st.Answer = answer
	return began, ended
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

// ReadServiceHealth says whether an answer is the failing check of Service
// namespace/name: kube-proxy's 503 with no local endpoint. answer describes
// it for the detail.
func ReadServiceHealth(status int, body []byte, namespace, name string) (failing bool, answer string) {
	var h serviceHealth
	if err := json.Unmarshal(body, &h); err != nil || h.LocalEndpoints == nil {
		return false, fmt.Sprintf("HTTP %d, not kube-proxy's service health check", status)
	}
	if h.Service.Namespace != namespace || h.Service.Name != name {
		return false, fmt.Sprintf("HTTP %d for Service %s/%s, not %s/%s", status, clip(h.Service.Namespace), clip(h.Service.Name), namespace, name)
	}
	answer = fmt.Sprintf("HTTP %d, localEndpoints %d", status, *h.LocalEndpoints)
	return status == statusServiceUnavailable && *h.LocalEndpoints == 0, answer
}

// clip bounds a string from the network in a detail.
func clip(s string) string {
	const max = 64
	if len(s) > max {
		return strconv.Quote(s[:max]) + "…"
	}
	return s
}

// statusServiceUnavailable is HTTP 503, kube-proxy's answer for a node
// without a ready local endpoint (net/http is the shell's, not imported here).
const statusServiceUnavailable = 503
