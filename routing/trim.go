package routing

import (
	"fmt"
	"strconv"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hapsuper/hapsuper/routing/judge"
)

// The informers' caches hold one trimmed copy of every EndpointSlice and
// Service of the namespace, thousands in a big one, so a copy keeps only what
// sliceEvent and the judge (ProxiedSlice, Service) read, and shares what repeats.
// The shared values (condition pointers, node names, label maps) are never
// written: objects in an informer cache are read-only, and nothing in this
// package writes to a trimmed object.
//
// client-go calls the transform from each informer's goroutine, and twice on
// the same object when the initial list is streamed (once into the
// reflector's temporary store, again on Replace), so it must be safe for
// concurrent use and idempotent: trimming a trimmed object changes nothing.

// transformKnowingNoPod is the informers' transform of an observer that
// does not know the pod (the pod's own informer, whose objects carry no
// endpoints): every endpoint keeps what Matcher.Kind reads.
func transformKnowingNoPod(obj any) (any, error) { return trimmer{}.transform(obj) }

// transform is the transform of this observer's slice and Service
// informers: it knows the pod, so of other pods' endpoints it keeps only
// what judge.Service reads.
func (o *Observer) transform(obj any) (any, error) {
	return trimmer{match: o.match, node: o.cfg.Identity.NodeName}.transform(obj)
}

// trimSlice is the slice as an observer that does not know the pod keeps it.
func trimSlice(s *discovery.EndpointSlice) *discovery.EndpointSlice { return trimmer{}.slice(s) }

// trimService keeps what the judge (Proxied, Service) reads of a Service.
func trimService(s *corev1.Service) *corev1.Service {
	meta := trimMeta(s.ObjectMeta)
	for _, k := range judge.KeptAnnotations {
		if v, ok := s.Annotations[k]; ok {
			if meta.Annotations == nil {
				meta.Annotations = map[string]string{}
			}
			meta.Annotations[k] = v
		}
	}
	return &corev1.Service{ObjectMeta: meta, Spec: corev1.ServiceSpec{
		Type:                     s.Spec.Type,
		ClusterIP:                s.Spec.ClusterIP,
		ClusterIPs:               s.Spec.ClusterIPs,
		ExternalIPs:              s.Spec.ExternalIPs,
		ExternalTrafficPolicy:    s.Spec.ExternalTrafficPolicy,
		InternalTrafficPolicy:    s.Spec.InternalTrafficPolicy,
		PublishNotReadyAddresses: s.Spec.PublishNotReadyAddresses,
		HealthCheckNodePort:      s.Spec.HealthCheckNodePort,
	}}
}

// trimmer trims for one pod. The zero trimmer knows no pod.
type trimmer struct {
	match judge.Matcher // this pod's name and addresses; none: not known
	node  string        // this pod's node
}

// transform trims obj for the informer's store.
func (t trimmer) transform(obj any) (any, error) {
	switch o := obj.(type) {
	case *discovery.EndpointSlice:
		return storeSlice(t.slice(o)), nil
	case *storedSlice: // the streamed initial list is transformed twice
		return o, nil
	case *corev1.Service:
		return trimService(o), nil
	case *corev1.Pod:
		return trimPod(o), nil
	}
	return obj, nil
}

// trimPod keeps what podEvent reads: the deletion grace period, the
// node's address and the pod's own paths (hostNetwork, hostPorts,
// readiness gates).
func trimPod(p *corev1.Pod) *corev1.Pod {
	out := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Name: p.Name, Namespace: p.Namespace, UID: p.UID, ResourceVersion: p.ResourceVersion,
		DeletionTimestamp: p.DeletionTimestamp, DeletionGracePeriodSeconds: p.DeletionGracePeriodSeconds,
	}}
	out.Spec.HostNetwork = p.Spec.HostNetwork
	out.Status.HostIP = p.Status.HostIP
	out.Spec.ReadinessGates = p.Spec.ReadinessGates
	for _, c := range p.Spec.Containers {
		var ports []corev1.ContainerPort
		for _, port := range c.Ports {
			if port.HostPort != 0 {
				ports = append(ports, corev1.ContainerPort{HostPort: port.HostPort, ContainerPort: port.ContainerPort, Protocol: port.Protocol})
			}
		}
		if len(ports) > 0 {
			out.Spec.Containers = append(out.Spec.Containers, corev1.Container{Name: c.Name, Ports: ports})
		}
	}
	return out
}

// slice keeps the slice's name, the labels and address type judge.ProxiedSlice
// reads, and, if kube-proxy programs it, the endpoints its verdict reads.
// Of the ports it keeps what slicePorts reads, shared among the slices
// that have the same.
func (t trimmer) slice(s *discovery.EndpointSlice) *discovery.EndpointSlice {
	out := &discovery.EndpointSlice{
		ObjectMeta:  trimMeta(s.ObjectMeta),
		AddressType: discovery.AddressType(sharedString(string(s.AddressType))),
	}
	if judge.ProxiedSlice(out) {
		out.Ports = sharedPorts(s.Ports)
	}
	if !judge.ProxiedSlice(out) {
		// sliceEvent does not keep it, but asks whether it lists this pod:
		// a path kube-proxy does not carry (headless, another proxy).
		for _, ep := range s.Endpoints {
			if len(t.match.Addrs) == 0 || t.match.Kind(ep) == judge.ThisPod {
				out.Endpoints = append(out.Endpoints, whole(ep))
			}
		}
		return out
	}
	if len(t.match.Addrs) == 0 {
		out.Endpoints = make([]discovery.Endpoint, 0, len(s.Endpoints))
		for _, ep := range s.Endpoints {
			out.Endpoints = append(out.Endpoints, whole(ep))
		}
		return out
	}
	// Of other pods' endpoints the judge asks only whether one is ready,
	// and whether one ready is on this node: one of each answers it.
	var readyHere, readyElsewhere bool
	for _, ep := range s.Endpoints {
		switch t.match.Kind(ep) {
		case judge.ThisPod:
			out.Endpoints = append(out.Endpoints, whole(ep))
		case judge.OtherPod:
			here := ep.NodeName != nil && *ep.NodeName == t.node
			if !judge.IsReady(ep) || (here && readyHere) || (!here && readyElsewhere) {
				continue
			}
			readyHere, readyElsewhere = readyHere || here, readyElsewhere || !here
			out.Endpoints = append(out.Endpoints, bare(ep))
		}
		// SameAddress: judge.Service counts it neither as this pod nor as a peer.
	}
	return out
}

// whole keeps what the judge (Matcher.Kind, IsReady, Service) reads of
// an endpoint.
func whole(ep discovery.Endpoint) discovery.Endpoint {
	e := bare(ep)
	e.Addresses = ep.Addresses
	if r := ep.TargetRef; r != nil {
		e.TargetRef = &corev1.ObjectReference{Kind: sharedString(r.Kind), Name: r.Name}
	}
	return e
}

// bare keeps an endpoint's conditions and node, without who it is.
func bare(ep discovery.Endpoint) discovery.Endpoint {
	return discovery.Endpoint{
		Conditions: discovery.EndpointConditions{
			Ready:       sharedBool(ep.Conditions.Ready),
			Serving:     sharedBool(ep.Conditions.Serving),
			Terminating: sharedBool(ep.Conditions.Terminating),
		},
		NodeName: sharedName(ep.NodeName),
	}
}

// trimMeta keeps what the informer's store needs (namespace, name and
// resource version) and the labels kube-proxy reads.
func trimMeta(m metav1.ObjectMeta) metav1.ObjectMeta {
	out := metav1.ObjectMeta{Name: m.Name, ResourceVersion: m.ResourceVersion, Labels: kubeProxyLabels(m.Labels)}
	if m.Namespace != "" {
		out.Namespace = sharedString(m.Namespace)
	}
	return out
}

// kubeProxyLabels are the labels kube-proxy reads. The labels of a
// Service's slices, its name alone, are shared.
func kubeProxyLabels(labels map[string]string) map[string]string {
	svc, named := labels[judge.LabelServiceName]
	_, other := labels[judge.LabelProxyName]
	_, headless := labels[judge.LabelHeadless]
	switch {
	case !other && !headless && named:
		return sharedLabels.get(svc)
	case !other && !headless:
		return nil
	}
	out := map[string]string{}
	for _, k := range []string{judge.LabelServiceName, judge.LabelProxyName, judge.LabelHeadless} {
		if v, ok := labels[k]; ok {
			out[k] = v
		}
	}
	return out
}

// The condition values every trimmed endpoint points at.
var condTrue, condFalse = true, false

func sharedBool(p *bool) *bool {
	switch {
	case p == nil:
		return nil
	case *p:
		return &condTrue
	}
	return &condFalse
}

// poolLimit bounds a pool: when it holds that many values it starts afresh,
// so names that come and go cannot grow it for the life of the pod. Objects
// keep the values they were given; only the sharing is lost.
const poolLimit = 4096

// pool gives the trimmed objects one shared value per key. The informers'
// goroutines share it.
type pool[V any] struct {
	fresh func(key string) V

	mu sync.Mutex
	m  map[string]V
}

var (
	// sharedNames holds namespaces, node names, targetRef kinds, address types.
	sharedNames = pool[*string]{fresh: func(s string) *string { return &s }}
	// sharedPortLists holds the trimmed port lists of slices.
	sharedPortLists = pool[[]discovery.EndpointPort]{fresh: decodePorts}
	// sharedLabels holds the trimmed labels of a Service's slices.
	sharedLabels = pool[map[string]string]{fresh: func(svc string) map[string]string {
		return map[string]string{judge.LabelServiceName: svc}
	}}
)

func (p *pool[V]) get(key string) V {
	p.mu.Lock()
	defer p.mu.Unlock()
	if v, ok := p.m[key]; ok {
		return v
	}
	if p.m == nil || len(p.m) >= poolLimit {
		p.m = map[string]V{}
	}
	v := p.fresh(key)
	p.m[key] = v
	return v
}

// sharedName is p pointing at a shared copy of *p; nil stays nil.
func sharedName(p *string) *string {
	if p == nil {
		return nil
	}
	return sharedNames.get(*p)
}

// sharedString is s in a shared copy.
func sharedString(s string) string { return *sharedNames.get(s) }

// sharedPorts keeps the ports slicePorts reads (named, numbered), with
// name, protocol and number, in a list shared by every slice with the same.
func sharedPorts(ports []discovery.EndpointPort) []discovery.EndpointPort {
	var b strings.Builder
	for _, p := range ports {
		if p.Name == nil || p.Port == nil || *p.Port == 0 {
			continue
		}
		proto := corev1.ProtocolTCP
		if p.Protocol != nil {
			proto = *p.Protocol
		}
		fmt.Fprintf(&b, "%s\x00%s\x00%d\x00", *p.Name, proto, *p.Port)
	}
	if b.Len() == 0 {
		return nil
	}
	return sharedPortLists.get(b.String())
}

// decodePorts builds the port list sharedPorts encoded as key.
func decodePorts(key string) []discovery.EndpointPort {
	f := strings.Split(strings.TrimSuffix(key, "\x00"), "\x00")
	out := make([]discovery.EndpointPort, 0, len(f)/3)
	for i := 0; i+2 < len(f); i += 3 {
		name, proto := f[i], corev1.Protocol(f[i+1])
		n, _ := strconv.ParseInt(f[i+2], 10, 32)
		port := int32(n)
		out = append(out, discovery.EndpointPort{Name: &name, Protocol: &proto, Port: &port})
	}
	return out
}
