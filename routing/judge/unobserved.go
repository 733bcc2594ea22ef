package judge

import (
	"encoding/json"
	"fmt"
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
// GCP L4 health checks to steer away. Settings.LoadBalancerDelay holds the
// verdict that long after the withdrawal.

// Readiness gate condition types set by load balancer controllers.
const (
	gatePrefixAWS = "target-health."                           // AWS Load Balancer Controller: target-health.elbv2.k8s.aws/<binding>
	gateGKENEG    = "cloud.google.com/load-balancer-neg-ready" // GKE container-native load balancing
)

// Service annotations under which a load balancer targets pod IPs.
const (
	AnnotationNLBTarget = "service.beta.kubernetes.io/aws-load-balancer-nlb-target-type" // "ip"
	AnnotationALBTarget = "alb.ingress.kubernetes.io/target-type"                        // "ip"
	AnnotationGKENEG    = "cloud.google.com/neg"                                         // {"ingress":true} or {"exposed_ports":…}
)

// KeptAnnotations are the annotations the Service trim keeps: the load
// balancers that target pod IPs, and the health-check windows.
var KeptAnnotations = []string{AnnotationNLBTarget, AnnotationALBTarget, AnnotationGKENEG,
	AnnotationAWSInterval, AnnotationAWSThreshold, AnnotationAzureInterval, AnnotationAzureThreshold}

// PodPaths names the pod's own paths that kube-proxy does not carry.
func PodPaths(pod *corev1.Pod) []string {
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
	for _, k := range []string{AnnotationNLBTarget, AnnotationALBTarget} {
		if strings.EqualFold(strings.TrimSpace(a[k]), "ip") {
			return fmt.Sprintf("annotation %s: ip: a load balancer targets pod IPs", k)
		}
	}
	if v, ok := a[AnnotationGKENEG]; ok && negTargets(v) {
		return fmt.Sprintf("annotation %s: %s: a load balancer targets pod IPs (NEG)", AnnotationGKENEG, v)
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

// UnproxiedWhy names a slice's path that kube-proxy does not program.
func UnproxiedWhy(s *discovery.EndpointSlice) string {
	if p, ok := s.Labels[LabelProxyName]; ok {
		return fmt.Sprintf("Service proxied by %q, not kube-proxy", p)
	}
	return "headless Service: DNS clients hold the pod's IP"
}

// UnobservedServiceWhy names the path of a Service kube-proxy does not
// program.
func UnobservedServiceWhy(svc *corev1.Service) string {
	if p, ok := svc.Labels[LabelProxyName]; ok {
		return fmt.Sprintf("Service proxied by %q, not kube-proxy", p)
	}
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		return "ExternalName Service"
	}
	return "headless Service: DNS clients hold the pod's IP"
}
