package routing

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
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

// The note fits the API's 1,024 bytes as the apiserver receives it: cut on
// a rune boundary whatever the alignment of a multi-byte character at the
// cut, and bytes that are not UTF-8 (which JSON sends as three-byte
// U+FFFD) replaced before it is measured.
func TestEventNoteWithinTheLimit(t *testing.T) {
	a := newAnnouncer(nil, Identity{PodName: "web-0", Namespace: "shop"}, slog.New(slog.DiscardHandler))
	t0 := time.Unix(1_000_000, 0)
	for _, detail := range []string{
		strings.Repeat("€", 400),
		"x" + strings.Repeat("€", 400),
		"xy" + strings.Repeat("€", 400),
		strings.Repeat("x\xff", 600), // a node's bytes, unquoted
		strings.Repeat("x\xe2", 600),
	} {
		e := a.event(drain.Status{StopAt: t0, SoftStopAt: t0.Add(time.Second), Reason: drain.ReasonBound, Detail: detail})
		if !utf8.ValidString(e.Note) {
			t.Errorf("note is not UTF-8: ...%q", e.Note[len(e.Note)-10:])
		}
		wire, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		var got eventsv1.Event
		if err := json.Unmarshal(wire, &got); err != nil {
			t.Fatal(err)
		}
		if len(got.Note) > maxEventNote || !strings.HasSuffix(got.Note, "...") {
			t.Errorf("note as received: %d bytes, want at most %d ending with the cut's mark", len(got.Note), maxEventNote)
		}
	}
}

// A pod name of 253 characters (the longest the API allows) gives an
// Event name that is still a DNS subdomain of at most 253 characters and
// a reportingInstance of at most 128; two such pods that differ only at
// the end keep Events of their own names.
func TestEventNamesOfALongPod(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	st := drain.Status{StopAt: t0, SoftStopAt: t0.Add(time.Second), Reason: drain.ReasonRoutedAway}
	names := map[string]bool{}
	for _, pod := range []string{
		strings.Repeat("a", 252) + "b",
		strings.Repeat("a", 252) + "c",
		strings.Repeat("a.", 126) + "b", // the cut falls next to a dot
		strings.Repeat("a-", 126) + "b",
		"web-0",
	} {
		a := newAnnouncer(nil, Identity{PodName: pod, Namespace: "shop"}, slog.New(slog.DiscardHandler))
		e := a.event(st)
		if errs := validation.IsDNS1123Subdomain(e.Name); len(errs) > 0 {
			t.Errorf("event name %q: %v", e.Name, errs)
		}
		if len(e.ReportingInstance) > maxReportingInstance || e.ReportingInstance == "" {
			t.Errorf("reportingInstance of %d bytes, want 1 to %d", len(e.ReportingInstance), maxReportingInstance)
		}
		if e.Regarding.Name != pod {
			t.Errorf("regarding %q, want the pod", e.Regarding.Name)
		}
		if names[e.Name] {
			t.Errorf("event name %q given to two pods", e.Name)
		}
		names[e.Name] = true
	}
	if e := newAnnouncer(nil, Identity{PodName: "web-0"}, slog.New(slog.DiscardHandler)).event(st); e.Name != fmt.Sprintf("web-0.%x", st.SoftStopAt.UnixNano()) || e.ReportingInstance != "web-0" {
		t.Errorf("a short pod name is changed: %q, %q", e.Name, e.ReportingInstance)
	}
}
