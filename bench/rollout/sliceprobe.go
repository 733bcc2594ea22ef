package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/hapsuper/hapsuper/test/k8s/k8stest"
)

// After an apiserver restart, kube-controller-manager's informers come
// back with client-go's backoff, and until its EndpointSlice controller
// does, a deleted pod stays ready in its slice: the drain ends at its
// bound with nothing to claim. So before each campaign rollout's first
// delete the run waits until the controller answers a probe.

// sliceProbe round-trips through the EndpointSlice controller: a Service
// of its own selecting a Pod object of its own, created in that order and
// the Pod then made ready, so that the controller's Service, Pod and
// EndpointSlice informers all have to be live before one of the Service's
// slices lists the Pod ready.
//
// The Service is headless, so that kube-proxy programs nothing for it (no
// sync inside the rollout's measurements). The Pod has no network and an
// address of TEST-NET-1 that no pod of the harness has: a slice left
// behind routes nowhere and lists no hapsuper pod.
type sliceProbe struct {
	client kubernetes.Interface
	ns     string
	node   *k8stest.Node // the node the Pod object names
	every  time.Duration // between listings of the Service's slices
}

// probeIP is the probe Pod's address (192.0.2.0/24, TEST-NET-1).
const probeIP = "192.0.2.1"

// probeBound is how long a rollout waits for the controller before it
// goes on without it. While the apiserver is down, client-go's reflectors
// retry at intervals that grow to [30, 60) s, so an informer can come back
// a minute after the apiserver is ready: on this harness the controller
// answered a probe 62.6 s after a restart's ready (2026-12-07, the third
// restart within two minutes).
const probeBound = 90 * time.Second

// wait creates Service and Pod name and returns once one of the Service's
// EndpointSlices lists the Pod ready, or with an error when ctx ends
// first. remove takes them away again, whatever wait returned.
func (p sliceProbe) wait(ctx context.Context, name string) error {
	labels := map[string]string{"app": name}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: p.ns},
		Spec: corev1.ServiceSpec{
			ClusterIP: corev1.ClusterIPNone,
			Selector:  labels,
			Ports:     []corev1.ServicePort{{Name: "http", Port: httpPort, TargetPort: intstr.FromInt32(8080)}},
		},
	}
	if _, err := p.client.CoreV1().Services(p.ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create probe Service %s: %w", name, err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: p.ns, Labels: labels},
		Spec: corev1.PodSpec{
			NodeName:                      p.node.Name,
			AutomountServiceAccountToken:  ptr.To(false),
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			Containers:                    []corev1.Container{{Name: "app", Image: "hapsuper.invalid/none"}},
		},
	}
	if _, err := p.client.CoreV1().Pods(p.ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create probe Pod %s: %w", name, err)
	}
	if err := p.markReady(ctx, name); err != nil {
		return err
	}
	tick := time.NewTicker(p.every)
	defer tick.Stop()
	var last error
	for {
		list, err := p.client.DiscoveryV1().EndpointSlices(p.ns).List(ctx, metav1.ListOptions{LabelSelector: discovery.LabelServiceName + "=" + name})
		if err == nil && listsReady(list.Items, probeIP) {
			return nil
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("no EndpointSlice of probe Service %s listed its pod ready (last listing's error: %v): %w", name, last, ctx.Err())
		case <-tick.C:
		}
	}
}

// markReady does the kubelet's status update for the probe Pod, as
// k8stest's SetPodReady does for the harness's pods.
func (p sliceProbe) markReady(ctx context.Context, name string) error {
	now := metav1.Now()
	data, err := json.Marshal(map[string]any{"status": corev1.PodStatus{
		Phase:  corev1.PodRunning,
		HostIP: p.node.IP.String(), HostIPs: []corev1.HostIP{{IP: p.node.IP.String()}},
		PodIP: probeIP, PodIPs: []corev1.PodIP{{IP: probeIP}},
		StartTime: &now,
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
		},
	}})
	if err != nil {
		return fmt.Errorf("encode status of probe Pod %s: %w", name, err)
	}
	if _, err := p.client.CoreV1().Pods(p.ns).Patch(ctx, name, types.MergePatchType, data, metav1.PatchOptions{}, "status"); err != nil {
		return fmt.Errorf("make probe Pod %s ready: %w", name, err)
	}
	return nil
}

// remove deletes Service and Pod name and the Service's EndpointSlices:
// the harness runs no garbage collector to remove the slices with their
// Service.
func (p sliceProbe) remove(ctx context.Context, name string) error {
	gone := func(err error) error {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
	errs := []error{
		gone(p.client.CoreV1().Services(p.ns).Delete(ctx, name, metav1.DeleteOptions{})),
		gone(p.client.CoreV1().Pods(p.ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})),
	}
	list, err := p.client.DiscoveryV1().EndpointSlices(p.ns).List(ctx, metav1.ListOptions{LabelSelector: discovery.LabelServiceName + "=" + name})
	errs = append(errs, err)
	if err == nil {
		for _, s := range list.Items {
			errs = append(errs, gone(p.client.DiscoveryV1().EndpointSlices(p.ns).Delete(ctx, s.Name, metav1.DeleteOptions{})))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("remove probe %s: %w", name, err)
	}
	return nil
}

// listsReady says whether one of slices has an endpoint at ip that is
// ready, as kube-proxy reads the condition (unset means ready).
func listsReady(slices []discovery.EndpointSlice, ip string) bool {
	for _, s := range slices {
		for _, ep := range s.Endpoints {
			for _, a := range ep.Addresses {
				if a == ip && (ep.Conditions.Ready == nil || *ep.Conditions.Ready) {
					return true
				}
			}
		}
	}
	return false
}

// awaitSliceController runs the probe before a rollout and says how long
// it waited and whether the controller answered. A rollout goes on after
// probeBound without an answer, said on the output: its drains then show
// among those whose pod the API did not withdraw (campaignBody).
func (r *runner) awaitSliceController(ctx context.Context, rollout int) (time.Duration, bool) {
	p := sliceProbe{client: r.env.H.Client, ns: k8stest.PodNamespace, node: r.env.H.Node(1), every: 150 * time.Millisecond}
	name := fmt.Sprintf("slice-probe-%d", rollout)
	began := time.Now()
	wctx, cancel := context.WithTimeout(ctx, probeBound)
	err := p.wait(wctx, name)
	cancel()
	took := time.Since(began)
	switch {
	case err != nil:
		r.printf("  warning: the EndpointSlice controller did not list the probe pod within %v; the rollout goes on: %v\n", probeBound, err)
	case took > time.Second:
		r.printf("  the EndpointSlice controller listed the probe pod after %.1fs\n", took.Seconds())
	}
	rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
	defer rcancel()
	if rerr := p.remove(rctx, name); rerr != nil {
		r.printf("  warning: %v\n", rerr)
	}
	return took, err == nil
}
