package routing

import (
	"fmt"
	"net/netip"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/hapsuper/hapsuper/routing/judge"
)

// watchState is what the watch keeps: the trimmed objects, this pod's paths
// and its grace period. Every method is called with Observer.mu held.
type watchState struct {
	services map[string]*corev1.Service
	slices   map[string]*storedSlice // by slice name
	// byService indexes slices by their kubernetes.io/service-name: an
	// event re-judges its Service from that Service's slices alone, not
	// from a scan of the namespace's (O(slices of the Service) per event,
	// where the scan was O(N), and O(N²) for the initial list).
	byService map[string][]*storedSlice
	paths     map[judge.PathKey]*judge.Path
	grace     *int64     // the pod's deletionGracePeriodSeconds
	watchErr  string     // the last error of a watch that has not synced
	podSeen   bool       // the pod watch delivered the pod
	deleting  bool       // the pod watch saw its deletionTimestamp
	hostIP    netip.Addr // the pod's node address (status.hostIP); invalid until known
	podPaths  []string
	// unproxied: Service → why, for Services kube-proxy does not program
	// whose slices listed the pod (see unobserved.go). Kept for the pod's
	// life: DNS clients and other proxies may hold the address for longer
	// than any slice shows it.
	unproxied map[string]string
}

// sliceEvent applies one EndpointSlice event received at now. s is nil
// for a deletion.
func (o *Observer) sliceEvent(name string, s *storedSlice, now time.Time) {
	st := &o.watch
	touched := map[string]bool{}
	if old := st.slices[name]; old != nil {
		touched[old.service()] = true
		st.unindex(name, old)
	}
	if s != nil {
		es := s.slice()
		if judge.ProxiedSlice(es) {
			st.index(name, s)
			touched[s.service()] = true
		} else if s.service() != "" && o.lists(es) {
			o.unproxiedPath(s.service(), judge.UnproxiedWhy(es))
		}
	}
	for svc := range touched {
		o.reevaluate(svc, now)
	}
}

// index records a proxied slice under its name and its Service (a list:
// a Service has a few slices, and a list costs a fraction of a map).
func (st *watchState) index(name string, s *storedSlice) {
	st.slices[name] = s
	svc := s.service()
	st.byService[svc] = append(st.byService[svc], s)
}

// unindex forgets the slice that index recorded as s.
func (st *watchState) unindex(name string, s *storedSlice) {
	delete(st.slices, name)
	svc := s.service()
	list := slices.DeleteFunc(st.byService[svc], func(x *storedSlice) bool { return x == s })
	if len(list) == 0 {
		delete(st.byService, svc)
		return
	}
	st.byService[svc] = list
}

// serviceEvent applies one Service event received at now. svc is nil for a
// deletion.
func (o *Observer) serviceEvent(name string, svc *corev1.Service, now time.Time) {
	if svc == nil {
		delete(o.watch.services, name)
	} else {
		o.watch.services[name] = svc
	}
	o.reevaluate(name, now)
}

// reevaluate recomputes the paths of one Service after a change received
// at now and records the transitions.
func (o *Observer) reevaluate(service string, now time.Time) {
	st := &o.watch
	svc := st.services[service]
	if svc != nil && !judge.Proxied(svc) {
		for k := range st.paths {
			if k.Service == service {
				delete(st.paths, k)
				o.unproxiedPath(service, judge.UnobservedServiceWhy(svc))
			}
		}
		return
	}
	verdicts := judge.Service(svc, expandSlices(st.byService[service]), o.match, o.cfg.Identity.NodeName)
	for k, p := range st.paths {
		if _, listed := verdicts[k.Family]; k.Service == service && !listed {
			why := "endpoint removed from the EndpointSlices"
			if svc == nil {
				why = "Service deleted"
			}
			o.transition(k, p, judge.PathVerdict{Withdrawn: true, Why: why}, now)
		}
	}
	for fam, v := range verdicts {
		k := judge.PathKey{Service: service, Family: fam}
		p := st.paths[k]
		if p == nil {
			p = &judge.Path{}
			st.paths[k] = p
		}
		o.transition(k, p, v, now)
	}
}

// transition records a path's new verdict. A path that turns withdrawn
// takes now as its since; one that turns pending drops it.
func (o *Observer) transition(k judge.PathKey, p *judge.Path, v judge.PathVerdict, now time.Time) {
	switch {
	case v.Withdrawn && p.Since.IsZero():
		p.Since = now
		o.log.Info("routing path withdrawn in the API", "path", k.String(), "why", v.Why)
	case !v.Withdrawn && !p.Since.IsZero():
		p.Since = time.Time{}
		o.log.Info("routing path routed to this pod again", "path", k.String(), "why", v.Why)
	}
	p.PathVerdict = v
}

// lists says whether one of the slice's endpoints is this pod's.
func (o *Observer) lists(s *discovery.EndpointSlice) bool {
	for _, ep := range s.Endpoints {
		if o.match.Kind(ep) == judge.ThisPod {
			return true
		}
	}
	return false
}

// unproxiedPath records a Service kube-proxy does not program that lists
// this pod.
func (o *Observer) unproxiedPath(service, why string) {
	if o.watch.unproxied[service] == why {
		return
	}
	if o.watch.unproxied == nil {
		o.watch.unproxied = map[string]string{}
	}
	o.watch.unproxied[service] = why
	o.log.Warn("routing path not observed: kube-proxy does not program it", "service", service, "why", why)
}

// podEvent records the pod's deletion grace period and the paths of its
// own that kube-proxy does not carry.
func (o *Observer) podEvent(pod *corev1.Pod) {
	if pod == nil || pod.Name != o.cfg.Identity.PodName {
		return
	}
	if pod.DeletionGracePeriodSeconds != nil {
		g := *pod.DeletionGracePeriodSeconds
		o.watch.grace = &g
	}
	if pod.DeletionTimestamp != nil && !o.watch.deleting {
		// The drain is coming: the baseline polls start now (confirmRound),
		// usually before the EndpointSlice withdrawal reaches kube-proxy.
		o.watch.deleting = true
		o.kickRound()
	}
	if a, err := netip.ParseAddr(pod.Status.HostIP); err == nil {
		o.watch.hostIP = a.Unmap()
	}
	paths := judge.PodPaths(pod)
	if !o.watch.podSeen || !slices.Equal(paths, o.watch.podPaths) {
		for _, p := range paths {
			o.log.Warn("routing path not observed", "path", p)
		}
	}
	o.watch.podSeen, o.watch.podPaths = true, paths
}

// handlers adapts informer events to the observer's state; each event takes
// its receipt time from the observer's clock.
func (o *Observer) handlers(apply func(obj any, deleted bool, now time.Time)) cache.ResourceEventHandler {
	run := func(obj any, deleted bool) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		o.mu.Lock()
		defer o.mu.Unlock()
		apply(obj, deleted, o.clock.Now())
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { run(obj, false) },
		UpdateFunc: func(_, obj any) { run(obj, false) },
		DeleteFunc: func(obj any) { run(obj, true) },
	}
}

func (o *Observer) applySlice(obj any, deleted bool, now time.Time) {
	s, ok := obj.(*storedSlice)
	if !ok {
		return
	}
	if deleted {
		o.sliceEvent(s.name, nil, now)
		return
	}
	o.sliceEvent(s.name, s, now)
}

func (o *Observer) applyService(obj any, deleted bool, now time.Time) {
	svc, ok := obj.(*corev1.Service)
	if !ok {
		return
	}
	if deleted {
		o.serviceEvent(svc.Name, nil, now)
		return
	}
	o.serviceEvent(svc.Name, svc, now)
}

func (o *Observer) applyPod(obj any, deleted bool, _ time.Time) {
	if pod, ok := obj.(*corev1.Pod); ok && !deleted {
		o.podEvent(pod)
	}
}

// watchError records why a watch fails, for the "not synced" detail.
func (o *Observer) watchError(resource string) func(*cache.Reflector, error) {
	return func(_ *cache.Reflector, err error) {
		o.log.Warn("routing watch failed", "resource", resource, "namespace", o.cfg.Identity.Namespace, "err", err)
		o.mu.Lock()
		defer o.mu.Unlock()
		o.watch.watchErr = fmt.Sprintf("watch %s: %v (the pod's service account needs list and watch on %s in namespace %s)",
			resource, err, resource, o.cfg.Identity.Namespace)
	}
}
