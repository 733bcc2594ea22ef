package routing

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
)

// Paths that reach the pod without kube-proxy. The observer cannot see when
// they stop sending: while one exists, the verdict is never withdrawn, only
// unverified, naming it.
//
//   - The pod's own: hostNetwork (the node's address reaches the pod) and
//     containers' hostPorts (node:port is DNATed to the pod by the CNI
//     portmap plugin, not by kube-proxy) — how bare-metal ingress is often
//     exposed to an external load balancer; and readiness gates of load
//     balancer controllers, which register the pod's IP as a target.
//   - A Service's: annotations that make a load balancer target pod IPs.
//   - Services kube-proxy does not program whose slices list the pod:
//     headless ones (DNS answers the pod's IP, clients keep it) and those
//     of another proxy (service.kubernetes.io/service-proxy-name).
//
// Load balancers that target pod IPs keep sending new connections after
// deregistration: field reports say 30 s to ~2 min for AWS NLB, ~24 s for
// GCP L4 health checks to steer away. Config.LoadBalancerDelay holds the
// verdict that long after the withdrawal.

// Readiness gate condition types set by load balancer controllers.
const (
	gatePrefixAWS = "target-health."                           // AWS Load Balancer Controller: target-health.elbv2.k8s.aws/<binding>
	gateGKENEG    = "cloud.google.com/load-balancer-neg-ready" // GKE container-native load balancing
)

// Service annotations under which a load balancer targets pod IPs.
const (
	annotationNLBTarget = "service.beta.kubernetes.io/aws-load-balancer-nlb-target-type" // "ip"
	annotationALBTarget = "alb.ingress.kubernetes.io/target-type"                        // "ip"
	annotationGKENEG    = "cloud.google.com/neg"                                         // {"ingress":true} or {"exposed_ports":…}
)

// keptAnnotations are the annotations the Service trim keeps: the load
// balancers that target pod IPs, and the health-check windows.
var keptAnnotations = []string{annotationNLBTarget, annotationALBTarget, annotationGKENEG,
	annotationAWSInterval, annotationAWSThreshold, annotationAzureInterval, annotationAzureThreshold}

// podPaths names the pod's own paths that kube-proxy does not carry.
func podPaths(pod *corev1.Pod) []string {
	var out []string
	if pod.Spec.HostNetwork {
		out = append(out, "hostNetwork: the node's address reaches the pod without kube-proxy")
	}
	var ports []string
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			if p.HostPort != 0 {
				ports = append(ports, fmt.Sprintf("%d/%s", p.HostPort, protocolOf(p.Protocol)))
			}
		}
	}
	if len(ports) > 0 && !pod.Spec.HostNetwork {
		out = append(out, "hostPort "+strings.Join(ports, ", ")+": the node's port reaches the pod without kube-proxy")
	}
	for _, g := range pod.Spec.ReadinessGates {
		t := string(g.ConditionType)
		if strings.HasPrefix(t, gatePrefixAWS) || t == gateGKENEG {
			out = append(out, "readiness gate "+t+": a load balancer targets the pod's IP")
		}
	}
	return out
}

func protocolOf(p corev1.Protocol) corev1.Protocol {
	if p == "" {
		return corev1.ProtocolTCP
	}
	return p
}

// lbTargets says why a load balancer targets the Service's pod IPs, or "".
func lbTargets(svc *corev1.Service) string {
	if svc == nil {
		return ""
	}
	a := svc.Annotations
	for _, k := range []string{annotationNLBTarget, annotationALBTarget} {
		if strings.EqualFold(strings.TrimSpace(a[k]), "ip") {
			return fmt.Sprintf("annotation %s: ip: a load balancer targets pod IPs", k)
		}
	}
	if v, ok := a[annotationGKENEG]; ok && negTargets(v) {
		return fmt.Sprintf("annotation %s: %s: a load balancer targets pod IPs (NEG)", annotationGKENEG, v)
	}
	return ""
}

// negTargets reads GKE's NEG annotation: pods are endpoints of a network
// endpoint group when ingress is true or ports are exposed. An annotation
// that cannot be read counts as targeting: never assume a path away.
func negTargets(v string) bool {
	var neg struct {
		Ingress      bool            `json:"ingress"`
		ExposedPorts json.RawMessage `json:"exposed_ports"`
	}
	if err := json.Unmarshal([]byte(v), &neg); err != nil {
		return true
	}
	return neg.Ingress || len(neg.ExposedPorts) > 0
}

// unproxiedWhy names a slice's path that kube-proxy does not program.
func unproxiedWhy(s *discovery.EndpointSlice) string {
	if p, ok := s.Labels[labelProxyName]; ok {
		return fmt.Sprintf("Service proxied by %q, not kube-proxy", p)
	}
	return "headless Service: DNS clients hold the pod's IP"
}

// unobservedServiceWhy names the path of a Service kube-proxy does not
// program.
func unobservedServiceWhy(svc *corev1.Service) string {
	if p, ok := svc.Labels[labelProxyName]; ok {
		return fmt.Sprintf("Service proxied by %q, not kube-proxy", p)
	}
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		return "ExternalName Service"
	}
	return "headless Service: DNS clients hold the pod's IP"
}

// unobserved lists every path not observed, sorted: the pod's own, the
// load balancers of the Services that list it, and the Services kube-proxy
// does not program that listed it. Called with Observer.mu held.
func (o *Observer) unobserved() []string {
	st := &o.watch
	var out []string
	if !o.cfg.PodChecked {
		out = slices.Clone(st.podPaths)
	}
	pod := len(out)
	seen := map[string]bool{}
	for k := range st.paths {
		if seen[k.service] {
			continue
		}
		seen[k.service] = true
		if why := lbTargets(st.services[k.service]); why != "" && !o.cfg.PodChecked {
			out = append(out, o.cfg.Identity.Namespace+"/"+k.service+": "+why)
		}
	}
	for svc, why := range st.unproxied {
		out = append(out, o.cfg.Identity.Namespace+"/"+svc+": "+why)
	}
	slices.Sort(out[pod:])
	return out
}
