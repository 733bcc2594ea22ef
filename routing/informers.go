package routing

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// The observer's informers are client-go's (list, watch, backoff, resync
// of a broken watch) over API's requests, without the generated informer
// factory: it links every API group of Kubernetes.

// requests are one resource's list and watch in a namespace.
type (
	listFunc[L runtime.Object] func(ctx context.Context, namespace string, opts metav1.ListOptions) (L, error)
	watchFunc                  func(ctx context.Context, namespace string, opts metav1.ListOptions) (watch.Interface, error)
)

// namespaceInformer watches the objects (of obj's type) of a namespace,
// each trimmed by transform before it is stored.
func namespaceInformer[L runtime.Object](client API, ns string, obj runtime.Object, list listFunc[L], watchAll watchFunc, transform cache.TransformFunc) (cache.SharedIndexInformer, error) {
	return newInformer(namespaceListWatch(ns, list, watchAll), client, obj, transform)
}

// namespaceListWatch lists and watches a namespace's objects, retrying a
// refused connection itself (retryRefused).
func namespaceListWatch[L runtime.Object](ns string, list listFunc[L], watchAll watchFunc) *cache.ListWatch {
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return retryRefused(ctx, time.After, func() (runtime.Object, error) { return list(ctx, ns, opts) })
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return retryRefused(ctx, time.After, func() (watch.Interface, error) { return watchAll(ctx, ns, opts) })
		},
	}
}

// newInformer is an informer on lw that stores what transform leaves of
// each object. It keeps the client's word on watch-list support (the fake
// clientset of the tests has none; a real apiserver streams the initial
// list with `watch`).
func newInformer(lw *cache.ListWatch, client API, obj runtime.Object, transform cache.TransformFunc) (cache.SharedIndexInformer, error) {
	inf := cache.NewSharedIndexInformer(cache.ToListWatcherWithWatchListSemantics(lw, client), obj, 0, cache.Indexers{})
	if err := inf.SetTransform(transform); err != nil {
		return nil, fmt.Errorf("watch %T: %w", obj, err)
	}
	return inf, nil
}

// ownPodInformer watches this pod alone with the least grant: `get` and
// `watch` on pods. A list, even one filtered to the pod's name, needs `list`
// on every pod of the namespace, so the informer's list is a get of the pod
// wrapped in a list, and its watch carries a field selector on the name.
func (o *Observer) ownPodInformer() (cache.SharedIndexInformer, error) {
	ns, name := o.cfg.Identity.Namespace, o.cfg.Identity.PodName
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, _ metav1.ListOptions) (runtime.Object, error) {
			pod, err := retryRefused(ctx, time.After, func() (*corev1.Pod, error) { return o.client.GetPod(ctx, ns, name) })
			if err != nil {
				return nil, fmt.Errorf("get pod %s/%s: %w", ns, name, err)
			}
			return &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: pod.ResourceVersion}, Items: []corev1.Pod{*pod}}, nil
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
			return retryRefused(ctx, time.After, func() (watch.Interface, error) { return o.client.WatchPods(ctx, ns, opts) })
		},
	}
	inf, err := newInformer(lw, o.client, &corev1.Pod{}, transformKnowingNoPod)
	if err != nil {
		return nil, fmt.Errorf("watch pod %s/%s: %w", ns, name, err)
	}
	return inf, nil
}

// A refused connection (an apiserver restarting: nothing listens) is
// retried here, every refusedRetryMin doubling to refusedRetryMax, rather
// than returned to client-go's reflector: the reflector backs off on it
// from 800 ms doubling to 30 s, with up to as much again of jitter, and
// resets only after 2 minutes without an error, so after an apiserver
// restart or two its watch stayed down for tens of seconds after the
// apiserver was back, while the store still read as synced and the
// verdict judged the pod from it (docs/routing.md, "What it watches").
// A refusal costs the apiserver nothing; every other error (429s
// included) still goes to the reflector and its backoff.
const (
	refusedRetryMin = 100 * time.Millisecond
	refusedRetryMax = time.Second
)

// retryRefused calls f until it returns anything but a refused connection,
// or ctx ends (then it returns f's last error). after is time.After.
func retryRefused[T any](ctx context.Context, after func(time.Duration) <-chan time.Time, f func() (T, error)) (T, error) {
	wait := refusedRetryMin
	for {
		v, err := f()
		if err == nil || !utilnet.IsConnectionRefused(err) {
			return v, err
		}
		select {
		case <-ctx.Done():
			return v, err
		case <-after(wait):
		}
		wait = min(2*wait, refusedRetryMax)
	}
}
