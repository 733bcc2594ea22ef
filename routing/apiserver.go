package routing

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/hapsuper/hapsuper/routing/kube"
)

// API is the apiserver as routing uses it: the requests of the observer,
// the announcer, PickMode and the surveys. *kube.Client is the real one;
// tests adapt client-go's fake clientset (kube/kubefake).
type API interface {
	GetPod(ctx context.Context, namespace, name string) (*corev1.Pod, error)
	WatchPods(ctx context.Context, namespace string, opts metav1.ListOptions) (watch.Interface, error)
	ListServices(ctx context.Context, namespace string, opts metav1.ListOptions) (*corev1.ServiceList, error)
	WatchServices(ctx context.Context, namespace string, opts metav1.ListOptions) (watch.Interface, error)
	ListEndpointSlices(ctx context.Context, namespace string, opts metav1.ListOptions) (*discovery.EndpointSliceList, error)
	WatchEndpointSlices(ctx context.Context, namespace string, opts metav1.ListOptions) (watch.Interface, error)
	ListNodes(ctx context.Context, opts metav1.ListOptions) (*corev1.NodeList, error)
	CreateEvent(ctx context.Context, ev *eventsv1.Event) error
}

var _ API = (*kube.Client)(nil)
