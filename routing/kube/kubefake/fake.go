// Package kubefake serves kube.Client's methods from client-go's clientset
// interface, for tests and benchmarks that run against client-go's fake
// clientset. The hapsuper binary must not import it: it links every API
// group.
package kubefake

import (
	"context"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/apimachinery/pkg/watch"
	clientdiscovery "k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/watchlist"
)

// Client adapts a clientset (usually fake.NewClientset) to kube.Client's
// methods.
type Client struct {
	cs kubernetes.Interface
}

// New adapts cs.
func New(cs kubernetes.Interface) *Client { return &Client{cs: cs} }

// IsWatchListSemanticsUnSupported passes on the clientset's word on
// streaming lists (the fake clientset has none), which client-go's
// reflector asks.
func (c *Client) IsWatchListSemanticsUnSupported() bool {
	return watchlist.DoesClientNotSupportWatchListSemantics(c.cs)
}

// GetPod reads one pod.
func (c *Client) GetPod(ctx context.Context, namespace, name string) (*corev1.Pod, error) {
	return c.cs.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
}

// WatchPods watches pods.
func (c *Client) WatchPods(ctx context.Context, namespace string, opts metav1.ListOptions) (watch.Interface, error) {
	return c.cs.CoreV1().Pods(namespace).Watch(ctx, opts)
}

// ListServices lists Services.
func (c *Client) ListServices(ctx context.Context, namespace string, opts metav1.ListOptions) (*corev1.ServiceList, error) {
	return c.cs.CoreV1().Services(namespace).List(ctx, opts)
}

// WatchServices watches Services.
func (c *Client) WatchServices(ctx context.Context, namespace string, opts metav1.ListOptions) (watch.Interface, error) {
	return c.cs.CoreV1().Services(namespace).Watch(ctx, opts)
}

// ListEndpointSlices lists EndpointSlices.
func (c *Client) ListEndpointSlices(ctx context.Context, namespace string, opts metav1.ListOptions) (*discovery.EndpointSliceList, error) {
	return c.cs.DiscoveryV1().EndpointSlices(namespace).List(ctx, opts)
}

// WatchEndpointSlices watches EndpointSlices.
func (c *Client) WatchEndpointSlices(ctx context.Context, namespace string, opts metav1.ListOptions) (watch.Interface, error) {
	return c.cs.DiscoveryV1().EndpointSlices(namespace).Watch(ctx, opts)
}

// ListNodes lists nodes.
func (c *Client) ListNodes(ctx context.Context, opts metav1.ListOptions) (*corev1.NodeList, error) {
	return c.cs.CoreV1().Nodes().List(ctx, opts)
}

// CreateEvent creates an Event.
func (c *Client) CreateEvent(ctx context.Context, ev *eventsv1.Event) error {
	_, err := c.cs.EventsV1().Events(ev.Namespace).Create(ctx, ev, metav1.CreateOptions{})
	return err
}

// CreateSelfSubjectAccessReview creates a SelfSubjectAccessReview.
func (c *Client) CreateSelfSubjectAccessReview(ctx context.Context, sar *authorizationv1.SelfSubjectAccessReview) (*authorizationv1.SelfSubjectAccessReview, error) {
	return c.cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
}

// ServerVersion asks the clientset's discovery.
func (c *Client) ServerVersion(ctx context.Context) (*version.Info, error) {
	return clientdiscovery.ToServerVersionInterfaceWithContext(c.cs.Discovery()).ServerVersionWithContext(ctx)
}
