// Package fakeapi fills client-go's fake clientset with what routing's
// Observer reads about the pod under test, for the benchmarks that run the
// Observer without an apiserver (rollout's fan-out part, slicewatch).
package fakeapi

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/hapsuper/hapsuper/routing"
)

// Pod is the pod under test, on node-0, behind Service web.
const Pod = "bench-0"

// Identity is the pod under test as hapsuper reads it from the downward API.
func Identity(ns string) routing.Identity {
	return routing.Identity{PodName: Pod, Namespace: ns, NodeName: "node-0", PodIPs: []string{"10.0.0.1"}}
}

// AddPod creates the pod under test in ns, Service web and web's slice
// with the pod ready.
func AddPod(ctx context.Context, c *fake.Clientset, ns string) error {
	if _, err := c.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: Pod, Namespace: ns}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create pod %s in the fake API: %w", Pod, err)
	}
	if err := AddService(ctx, c, ns, "web"); err != nil {
		return err
	}
	if _, err := c.DiscoveryV1().EndpointSlices(ns).Create(ctx, PodSlice(ns, true), metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create the pod's EndpointSlice in the fake API: %w", err)
	}
	return nil
}

// AddService creates a ClusterIP Service.
func AddService(ctx context.Context, c *fake.Clientset, ns, name string) error {
	_, err := c.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.10", Type: corev1.ServiceTypeClusterIP}}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create Service %s in the fake API: %w", name, err)
	}
	return nil
}

// PodSlice is web's slice: the pod (ready, or serving and terminating) and
// a ready peer on node-1.
func PodSlice(ns string, ready bool) *discovery.EndpointSlice {
	return &discovery.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "web-1", Namespace: ns, Labels: map[string]string{discovery.LabelServiceName: "web"}},
		AddressType: discovery.AddressTypeIPv4,
		Ports:       []discovery.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080)}},
		Endpoints: []discovery.Endpoint{
			{Addresses: []string{"10.0.0.1"}, NodeName: ptr.To("node-0"), TargetRef: &corev1.ObjectReference{Kind: "Pod", Name: Pod, Namespace: ns},
				Conditions: discovery.EndpointConditions{Ready: ptr.To(ready), Serving: ptr.To(true), Terminating: ptr.To(!ready)}},
			{Addresses: []string{"10.0.0.2"}, NodeName: ptr.To("node-1"), TargetRef: &corev1.ObjectReference{Kind: "Pod", Name: "bench-1", Namespace: ns},
				Conditions: discovery.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)}},
		},
	}
}

// MarkDeleting gives the pod under test in ns a deletionTimestamp of now
// and grace seconds, as the API's DELETE of a pod with a grace period does.
func MarkDeleting(ctx context.Context, c *fake.Clientset, ns string, grace int64) error {
	pod, err := c.CoreV1().Pods(ns).Get(ctx, Pod, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("get pod %s in the fake API: %w", Pod, err)
	}
	now := metav1.Now()
	pod.DeletionTimestamp, pod.DeletionGracePeriodSeconds = &now, &grace
	if _, err := c.CoreV1().Pods(ns).Update(ctx, pod, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("mark pod %s deleting in the fake API: %w", Pod, err)
	}
	return nil
}
