package routing

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"

	"github.com/hapsuper/hapsuper/routing/judge"
)

// A survey is the observer's judgement of the pod's routing made once, from
// one list of the namespace's EndpointSlices and Services and one read of
// the pod, for a preflight check (`hapsuper check`). The objects go through
// the observer's own handlers, so the paths and the paths not observed are
// what a drain would start from.

// Survey is what the observer would see of this pod's routing now.
type Survey struct {
	Paths      []SurveyPath // Services and families whose slices list the pod, sorted
	Unobserved []string     // paths kube-proxy does not carry, as a drain's detail names them
	// External: the LoadBalancer Services with externalTrafficPolicy Local
	// whose slices list the pod, sorted.
	External []SurveyExternal
}

// SurveyExternal is the external path of one LoadBalancer Service with
// externalTrafficPolicy Local, as a drain would judge it (balancer.go).
type SurveyExternal struct {
	Service string // namespace/name
	// OtherReadyOnNode: another ready endpoint runs on the pod's node, so
	// the node's external traffic goes there once the pod is not ready.
	OtherReadyOnNode bool
	// HealthCheckNodePort is spec.healthCheckNodePort; 0: none.
	HealthCheckNodePort int32
	URL                 string // the node's health check as the pod asks it; empty without hostIP or port
	Answer              string // what it answered, or why it was not asked
	Reachable           bool   // kube-proxy answered for this Service
	Window              time.Duration
	WindowSource        string // where the window comes from, or why it is unknown
}

// SurveyPath is one Service and address family whose slices list the pod.
type SurveyPath struct {
	Service   string   // namespace/name
	Family    string   // IPv4 or IPv6
	Slices    []string // the EndpointSlices that list the pod, sorted
	Withdrawn bool     // withdrawn in the API already (the pod is not ready)
	Why       string   // what the verdict rests on
}

// SurveyPod lists the namespace's EndpointSlices and Services and gets the
// pod, and judges them as the observer does. pod is the pod as read (its
// own fields are checked by the caller too). Each call is bounded by ctx.
//
// window is --lb-health-check-window; the health check of the node of each
// external path is asked once, bounded by DefaultRequestTimeout.
func SurveyPod(ctx context.Context, client API, id Identity, pod *corev1.Pod, window time.Duration) (Survey, error) {
	o, err := newObserver(Config{Mode: ModeEndpointSlices, Identity: id}, client, clock.RealClock{}, (&net.Dialer{}).DialContext, nil)
	if err != nil {
		return Survey{}, err
	}
	ns := id.Namespace
	// ResourceVersion "0": served from the apiserver's cache, as the
	// informers' first list is.
	sliceList, err := client.ListEndpointSlices(ctx, ns, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return Survey{}, fmt.Errorf("list endpointslices in namespace %s: %w", ns, err)
	}
	services, err := client.ListServices(ctx, ns, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return Survey{}, fmt.Errorf("list services in namespace %s: %w", ns, err)
	}
	feed := func(apply func(any, bool, time.Time), obj any) {
		if t, err := o.transform(obj); err == nil {
			o.handlers(apply).OnAdd(t, true)
		}
	}
	for i := range services.Items {
		feed(o.applyService, &services.Items[i])
	}
	for i := range sliceList.Items {
		feed(o.applySlice, &sliceList.Items[i])
	}
	if pod != nil {
		t, err := transformKnowingNoPod(pod.DeepCopy())
		if err == nil {
			o.handlers(o.applyPod).OnAdd(t, true)
		}
	}

	o.mu.Lock()
	defer o.mu.Unlock()
	var s Survey
	for k, p := range o.watch.paths {
		sp := SurveyPath{Service: ns + "/" + k.Service, Family: string(k.Family), Withdrawn: p.Withdrawn, Why: p.Why}
		for name, sl := range o.watch.slices {
			if sl.service() == k.Service && sl.addressType == k.Family && o.lists(sl.slice()) {
				sp.Slices = append(sp.Slices, name)
			}
		}
		slices.Sort(sp.Slices)
		s.Paths = append(s.Paths, sp)
	}
	sortPaths(s.Paths)
	f := o.facts()
	s.Unobserved = judge.Unobserved(&f)
	s.External = o.surveyExternal(ctx, window)
	return s, nil
}

// surveyExternal judges the external paths of the Services whose slices
// list the pod. Called with o.mu held; the requests are bounded.
func (o *Observer) surveyExternal(ctx context.Context, window time.Duration) []SurveyExternal {
	var out []SurveyExternal
	seen := map[string]bool{}
	for k := range o.watch.paths {
		svc := o.watch.services[k.Service]
		if seen[k.Service] || svc == nil || svc.Spec.Type != corev1.ServiceTypeLoadBalancer ||
			svc.Spec.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyLocal {
			continue
		}
		seen[k.Service] = true
		e := SurveyExternal{Service: o.cfg.Identity.Namespace + "/" + k.Service, HealthCheckNodePort: svc.Spec.HealthCheckNodePort}
		e.Window, e.WindowSource = judge.HealthCheckWindow(svc.Annotations, window)
		for _, sl := range expandSlices(o.watch.byService[k.Service]) {
			for _, ep := range sl.Endpoints {
				if o.match.Kind(ep) == judge.OtherPod && judge.IsReady(ep) && ep.NodeName != nil && *ep.NodeName == o.cfg.Identity.NodeName {
					e.OtherReadyOnNode = true
				}
			}
		}
		switch {
		case e.HealthCheckNodePort == 0:
			e.Answer = "no healthCheckNodePort"
		case !o.watch.hostIP.IsValid():
			e.Answer = "the pod's hostIP is not known"
		default:
			ck := judge.CheckKey{Addr: o.watch.hostIP, Port: e.HealthCheckNodePort}
			e.URL = ck.URL()
			rctx, cancel := context.WithTimeout(ctx, DefaultRequestTimeout)
			status, body, err := o.http.getPath(rctx, ck.AddrPort().String(), "/")
			cancel()
			if err != nil {
				e.Answer = classify(e.URL, err, DefaultRequestTimeout).Msg
			} else {
				_, e.Answer = judge.ReadServiceHealth(status, body, o.cfg.Identity.Namespace, k.Service)
				e.Reachable = strings.HasPrefix(e.Answer, "HTTP ") && strings.Contains(e.Answer, "localEndpoints")
			}
		}
		out = append(out, e)
	}
	o.http.CloseIdleConnections()
	slices.SortFunc(out, func(a, b SurveyExternal) int { return strings.Compare(a.Service, b.Service) })
	return out
}

func sortPaths(ps []SurveyPath) {
	slices.SortFunc(ps, func(a, b SurveyPath) int {
		return strings.Compare(a.Service+" "+a.Family, b.Service+" "+b.Family)
	})
}

// NodeHealth is what one node's kube-proxy healthz said.
type NodeHealth struct {
	Node string
	Addr string // host:port asked; empty when the node has no InternalIP
	// Err says why the answer is of no use to a drain: unreachable, not
	// kube-proxy healthz, no per-family status. Empty when it is.
	Err string
	// Pending: it accepted the connection and did not answer in time (a
	// frozen kube-proxy); a drain holds such a node pending.
	Pending bool
	// Proxy is what answered, as far as the answer tells; ProxyUnknown
	// when nothing answered or the answer names no known proxy.
	Proxy judge.Proxy
	// Families: the age of the last rule sync per address family, in the
	// node's clock (currentTime − lastUpdated), and whether it is healthy.
	Families []FamilySync
}

// FamilySync is one family's status in a kube-proxy healthz answer.
type FamilySync struct {
	Family  string // IPv4 or IPv6
	Age     time.Duration
	Healthy bool
}

// ProbeKubeProxies lists the nodes, as the kube-proxy mode does, and asks
// each node's kube-proxy healthz once, at most DefaultConcurrency at a time,
// each request bounded by DefaultRequestTimeout. The error is the node
// list's.
func ProbeKubeProxies(ctx context.Context, client API, port int) ([]NodeHealth, error) {
	return probeKubeProxies(ctx, client, port, (&net.Dialer{}).DialContext)
}

func probeKubeProxies(ctx context.Context, client API, port int, dial dialFunc) ([]NodeHealth, error) {
	if port == 0 {
		port = DefaultHealthzPort
	}
	list, err := client.ListNodes(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	hc := newHealthzClient(dial, DefaultRequestTimeout/2)
	defer hc.CloseIdleConnections()
	out := make([]NodeHealth, len(list.Items))
	sem := make(chan struct{}, DefaultConcurrency)
	var wg sync.WaitGroup
	for i := range list.Items {
		node := &list.Items[i]
		out[i] = NodeHealth{Node: node.Name}
		ip := internalIP(node)
		if !ip.IsValid() {
			out[i].Err = "node has no InternalIP to reach kube-proxy at"
			continue
		}
		out[i].Addr = net.JoinHostPort(ip.String(), strconv.Itoa(port))
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			out[i] = probeNode(ctx, hc, out[i])
		})
	}
	wg.Wait()
	slices.SortFunc(out, func(a, b NodeHealth) int { return strings.Compare(a.Node, b.Node) })
	return out, nil
}

// probeNode asks one node's healthz and fills n from the answer.
func probeNode(ctx context.Context, hc *healthzClient, n NodeHealth) NodeHealth {
	h, _, _, _, err := hc.fetch(ctx, n.Addr, DefaultRequestTimeout)
	if err != nil {
		n.Err = err.Error()
		if pe, ok := err.(*judge.PollError); ok {
			n.Pending, n.Proxy = pe.Pending, pe.Proxy
		}
		return n
	}
	n.Proxy = h.Proxy
	if h.Proxy.NoSync() {
		n.Err = fmt.Sprintf("healthz at %s answers as %s: %s", n.Addr, h.Proxy, h.Proxy.Why())
		return n
	}
	for fam, f := range h.Families {
		n.Families = append(n.Families, FamilySync{Family: string(fam), Age: h.CurrentTime.Sub(f.LastUpdated), Healthy: f.Healthy})
	}
	slices.SortFunc(n.Families, func(a, b FamilySync) int { return strings.Compare(a.Family, b.Family) })
	return n
}
