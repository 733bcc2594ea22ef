// Package kube is hapsuper's Kubernetes API client: the few requests routing
// and check make, on client-go's rest client (auth, rate limit, retries)
// with a scheme of the four API groups they use: core/v1, discovery/v1,
// events.k8s.io/v1 and authorization/v1.
//
// It exists for the process's memory: client-go's generated clientset
// registers every API group of Kubernetes at start, and those pages of the
// binary stay in RSS for the pod's life (docs in the README's benchmarks).
// It must not import k8s.io/client-go/kubernetes or its scheme package;
// cmd/hapsuper's dependency test checks that.
package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
)

// Client makes hapsuper's requests. Its methods are safe for concurrent use.
type Client struct {
	core, discovery, events, authorization *rest.RESTClient
	params                                 runtime.ParameterCodec
}

// codecs is the scheme of the four groups, built on first use so that a
// process that never talks to the apiserver (routing off) does not pay for
// it.
var codecs = sync.OnceValues(func() (*runtime.Scheme, serializer.CodecFactory) {
	s := runtime.NewScheme()
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"}) // Status, WatchEvent, options
	for _, add := range []func(*runtime.Scheme) error{
		corev1.AddToScheme, discovery.AddToScheme, eventsv1.AddToScheme, authorizationv1.AddToScheme,
	} {
		utilruntime.Must(add(s))
	}
	return s, serializer.NewCodecFactory(s)
})

// NewForConfig builds a Client on cfg, as client-go's clientset does: one
// HTTP client and one rate limiter (cfg.QPS, cfg.Burst) shared by the
// groups, protobuf preferred for reads.
func NewForConfig(cfg *rest.Config) (*Client, error) {
	c := *cfg
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	if c.RateLimiter == nil && c.QPS > 0 {
		if c.Burst <= 0 {
			return nil, fmt.Errorf("build a Kubernetes client: burst must be above 0 when QPS is set")
		}
		c.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(c.QPS, c.Burst)
	}
	httpClient, err := rest.HTTPClientFor(&c)
	if err != nil {
		return nil, fmt.Errorf("build a Kubernetes client: %w", err)
	}
	scheme, cf := codecs()
	group := func(gv schema.GroupVersion, apiPath string) (*rest.RESTClient, error) {
		gc := c
		gc.GroupVersion = &gv
		gc.APIPath = apiPath
		gc.NegotiatedSerializer = rest.CodecFactoryForGeneratedClient(scheme, cf).WithoutConversion()
		rc, err := rest.RESTClientForConfigAndClient(&gc, httpClient)
		if err != nil {
			return nil, fmt.Errorf("build a Kubernetes client for %s: %w", gv, err)
		}
		return rc, nil
	}
	out := &Client{params: runtime.NewParameterCodec(scheme)}
	if out.core, err = group(corev1.SchemeGroupVersion, "/api"); err != nil {
		return nil, err
	}
	if out.discovery, err = group(discovery.SchemeGroupVersion, "/apis"); err != nil {
		return nil, err
	}
	if out.events, err = group(eventsv1.SchemeGroupVersion, "/apis"); err != nil {
		return nil, err
	}
	if out.authorization, err = group(authorizationv1.SchemeGroupVersion, "/apis"); err != nil {
		return nil, err
	}
	return out, nil
}

// GetPod reads one pod.
func (c *Client) GetPod(ctx context.Context, namespace, name string) (*corev1.Pod, error) {
	out := &corev1.Pod{}
	err := c.core.Get().UseProtobufAsDefault().Namespace(namespace).Resource("pods").Name(name).
		VersionedParams(&metav1.GetOptions{}, c.params).Do(ctx).Into(out)
	return out, err
}

// WatchPods watches the pods of namespace that opts select.
func (c *Client) WatchPods(ctx context.Context, namespace string, opts metav1.ListOptions) (watch.Interface, error) {
	return c.watch(ctx, c.core, namespace, "pods", opts)
}

// ListServices lists the Services of namespace.
func (c *Client) ListServices(ctx context.Context, namespace string, opts metav1.ListOptions) (*corev1.ServiceList, error) {
	out := &corev1.ServiceList{}
	return out, c.list(ctx, c.core, namespace, "services", opts, out)
}

// WatchServices watches the Services of namespace.
func (c *Client) WatchServices(ctx context.Context, namespace string, opts metav1.ListOptions) (watch.Interface, error) {
	return c.watch(ctx, c.core, namespace, "services", opts)
}

// ListEndpointSlices lists the EndpointSlices of namespace.
func (c *Client) ListEndpointSlices(ctx context.Context, namespace string, opts metav1.ListOptions) (*discovery.EndpointSliceList, error) {
	out := &discovery.EndpointSliceList{}
	return out, c.list(ctx, c.discovery, namespace, "endpointslices", opts, out)
}

// WatchEndpointSlices watches the EndpointSlices of namespace.
func (c *Client) WatchEndpointSlices(ctx context.Context, namespace string, opts metav1.ListOptions) (watch.Interface, error) {
	return c.watch(ctx, c.discovery, namespace, "endpointslices", opts)
}

// ListNodes lists the cluster's nodes (one page when opts.Limit is set).
func (c *Client) ListNodes(ctx context.Context, opts metav1.ListOptions) (*corev1.NodeList, error) {
	out := &corev1.NodeList{}
	return out, c.list(ctx, c.core, "", "nodes", opts, out)
}

// CreateEvent posts an events.k8s.io/v1 Event in its namespace.
func (c *Client) CreateEvent(ctx context.Context, ev *eventsv1.Event) error {
	return c.events.Post().UseProtobufAsDefault().Namespace(ev.Namespace).Resource("events").
		VersionedParams(&metav1.CreateOptions{}, c.params).Body(ev).Do(ctx).Error()
}

// CreateSelfSubjectAccessReview asks whether the client's own credentials
// may make a request.
func (c *Client) CreateSelfSubjectAccessReview(ctx context.Context, sar *authorizationv1.SelfSubjectAccessReview) (*authorizationv1.SelfSubjectAccessReview, error) {
	out := &authorizationv1.SelfSubjectAccessReview{}
	err := c.authorization.Post().UseProtobufAsDefault().Resource("selfsubjectaccessreviews").
		VersionedParams(&metav1.CreateOptions{}, c.params).Body(sar).Do(ctx).Into(out)
	return out, err
}

// ServerVersion asks the apiserver its version (GET /version).
func (c *Client) ServerVersion(ctx context.Context) (*version.Info, error) {
	body, err := c.core.Get().AbsPath("/version").Do(ctx).Raw()
	if err != nil {
		return nil, err
	}
	var info version.Info
	if err := json.Unmarshal(body, &info); err != nil {
		return nil, fmt.Errorf("parse the server version: %w", err)
	}
	return &info, nil
}

func (c *Client) list(ctx context.Context, rc *rest.RESTClient, namespace, resource string, opts metav1.ListOptions, into runtime.Object) error {
	return rc.Get().UseProtobufAsDefault().NamespaceIfScoped(namespace, namespace != "").Resource(resource).
		VersionedParams(&opts, c.params).Timeout(timeoutOf(opts)).Do(ctx).Into(into)
}

func (c *Client) watch(ctx context.Context, rc *rest.RESTClient, namespace, resource string, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	return rc.Get().UseProtobufAsDefault().Namespace(namespace).Resource(resource).
		VersionedParams(&opts, c.params).Timeout(timeoutOf(opts)).Watch(ctx)
}

// timeoutOf is the request timeout opts ask for, as client-go's typed
// clients set it (the reflector's watches carry one).
func timeoutOf(opts metav1.ListOptions) time.Duration {
	if opts.TimeoutSeconds == nil {
		return 0
	}
	return time.Duration(*opts.TimeoutSeconds) * time.Second
}
