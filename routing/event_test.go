package routing

import (
	"context"
	"log/slog"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/hapsuper/hapsuper/drain"
	"github.com/hapsuper/hapsuper/routing/kube/kubefake"
)

// The end of a drain becomes one Event on the pod; a drain the bound ended
// is a Warning that carries what was pending.
func TestAnnouncerPostsOneEvent(t *testing.T) {
	client := fake.NewClientset()
	a := newAnnouncer(kubefake.New(client), Identity{PodName: "web-0", Namespace: "shop"}, slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.run(ctx) }()

	t0 := time.Unix(1_000_000, 0)
	st := drain.Status{StopAt: t0, SoftStopAt: t0.Add(18 * time.Second), Reason: drain.ReasonBound, Detail: "routing: node2 pending"}
	a.drainEnded(st)
	a.drainEnded(st) // a second end is dropped

	var events []any
	end := time.Now().Add(5 * time.Second)
	for time.Now().Before(end) {
		l, err := client.EventsV1().Events("shop").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(l.Items) > 0 {
			e := l.Items[0]
			if e.Type != corev1.EventTypeWarning || e.Reason != "DrainEnded" || e.Regarding.Name != "web-0" ||
				e.Note != "drain ended bound after 18s: routing: node2 pending" {
				t.Errorf("event = type %q reason %q regarding %q note %q", e.Type, e.Reason, e.Regarding.Name, e.Note)
			}
			events = append(events, e)
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(events) != 1 {
		t.Fatal("no event within 5s")
	}
	select {
	case <-done:
		t.Fatal("run returned before its context ended: it would stop the supervisor")
	case <-time.After(50 * time.Millisecond):
	}
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("run did not return within 5s of cancel")
	}
}
