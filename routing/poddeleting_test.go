package routing

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/hapsuper/hapsuper/routing/kube/kubefake"
)

// PodDeleting reads the pod itself, not the watch: not deleted, deleted
// with its grace period, and an error for a pod that cannot be read or a
// Cluster that observes nothing.
func TestPodDeleting(t *testing.T) {
	id := Identity{PodName: "web-0", Namespace: "shop"}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: "shop"}}
	client := fake.NewClientset(pod)
	c := &Cluster{client: kubefake.New(client), pod: id}
	ctx := context.Background()
	if deleting, _, err := c.PodDeleting(ctx); err != nil || deleting {
		t.Fatalf("pod not deleted: deleting %v, err %v", deleting, err)
	}
	grace := int64(45)
	now := metav1.NewTime(time.Now())
	pod.DeletionTimestamp, pod.DeletionGracePeriodSeconds = &now, &grace
	if _, err := client.CoreV1().Pods("shop").Update(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	deleting, g, err := c.PodDeleting(ctx)
	if err != nil || !deleting || g != 45*time.Second {
		t.Errorf("pod being deleted: deleting %v, grace %v, err %v; want true, 45s", deleting, g, err)
	}
	if _, _, err := (&Cluster{client: kubefake.New(client), pod: Identity{PodName: "other", Namespace: "shop"}}).PodDeleting(ctx); err == nil {
		t.Error("a pod that does not exist: no error")
	}
	if _, _, err := (&Cluster{}).PodDeleting(ctx); err == nil {
		t.Error("routing off: no error")
	}
}
