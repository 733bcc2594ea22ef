package routing

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// ownPodInformer watches this pod alone with the least grant: `get` and
// `watch` on pods. A list, even one filtered to the pod's name, needs `list`
// on every pod of the namespace, so the informer's list is a get of the pod
// wrapped in a list, and its watch carries a field selector on the name.
func (o *Observer) ownPodInformer() (cache.SharedIndexInformer, error) {
	ns, name := o.cfg.Identity.Namespace, o.cfg.Identity.PodName
	pods := o.client.CoreV1().Pods(ns)
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, _ metav1.ListOptions) (runtime.Object, error) {
			pod, err := pods.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return nil, fmt.Errorf("get pod %s/%s: %w", ns, name, err)
			}
			return &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: pod.ResourceVersion}, Items: []corev1.Pod{*pod}}, nil
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
			return pods.Watch(ctx, opts)
		},
	}
	// Keep the client's word on watch-list support (the fake clientset of
	// the tests has none; a real apiserver streams the pod with `watch`).
	inf := cache.NewSharedIndexInformer(cache.ToListWatcherWithWatchListSemantics(lw, o.client), &corev1.Pod{}, 0, cache.Indexers{})
	if err := inf.SetTransform(trim); err != nil {
		return nil, fmt.Errorf("watch pod %s/%s: %w", ns, name, err)
	}
	return inf, nil
}
