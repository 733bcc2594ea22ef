package routing

import (
	"context"
	"fmt"
	"hash/fnv"
	"log/slog"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hapsuper/hapsuper/drain"

	"github.com/hapsuper/hapsuper/routing/judge"
)

// Limits of events.k8s.io/v1 (k8s.io/kubernetes pkg/apis/core/validation,
// events.go): the note and reportingInstance in bytes; the name is a DNS
// subdomain.
const (
	maxEventNote         = 1024
	maxReportingInstance = 128
	maxEventName         = 253
)

// eventTimeout bounds the one API call that reports a drain's end;
// eventExitWait is what it may still take once HAProxy has exited.
const (
	eventTimeout  = 2 * time.Second
	eventExitWait = 500 * time.Millisecond
)

// announcer reports the end of a drain as a Kubernetes Event on the pod, in
// the routing modes (it needs `create` on events). It is best effort: a
// refused or slow call is logged and changes nothing else.
type announcer struct {
	client API
	pod    Identity
	log    *slog.Logger
	ends   chan drain.Status // capacity 1: one drain per process
}

func newAnnouncer(client API, pod Identity, log *slog.Logger) *announcer {
	return &announcer{client: client, pod: pod, log: log, ends: make(chan drain.Status, 1)}
}

// drainEnded hands the result to run without blocking the loop.
func (a *announcer) drainEnded(st drain.Status) {
	select {
	case a.ends <- st:
	default: // one already queued: a drain ends once
	}
}

// run posts the Event when the drain ends, until ctx ends. HAProxy often
// exits a few milliseconds after the soft stop, which ends ctx: a post under
// way then gets eventExitWait more, so the Event is not lost and hapsuper's
// exit is not held up for long.
func (a *announcer) run(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return nil
	case st := <-a.ends:
		postCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), eventTimeout)
		defer cancel()
		posted := make(chan struct{})
		go func() { // bounded by postCtx
			defer close(posted)
			a.post(postCtx, st)
		}()
		select {
		case <-posted:
			<-ctx.Done() // an actor returns only when the group stops
		case <-ctx.Done():
			select {
			case <-posted:
			case <-time.After(eventExitWait):
				cancel()
				<-posted
			}
		}
		return nil
	}
}

func (a *announcer) post(ctx context.Context, st drain.Status) {
	ctx, cancel := context.WithTimeout(ctx, eventTimeout)
	defer cancel()
	if err := a.client.CreateEvent(ctx, a.event(st)); err != nil {
		hint := ""
		if apierrors.IsForbidden(err) {
			hint = "grant create on events (events.k8s.io) to report drains on the pod"
		}
		a.log.Warn("drain event not recorded", "err", err, "hint", hint)
		return
	}
	a.log.Debug("drain event recorded", "pod", a.pod.Namespace+"/"+a.pod.PodName)
}

func (a *announcer) event(st drain.Status) *eventsv1.Event {
	typ := corev1.EventTypeNormal
	switch st.Reason {
	case drain.ReasonBound, drain.ReasonUnavailable, drain.ReasonUnverified:
		typ = corev1.EventTypeWarning
	}
	note := fmt.Sprintf("drain ended %s after %s", st.Reason, st.SoftStopAt.Sub(st.StopAt).Round(time.Millisecond))
	if st.Detail != "" {
		note += ": " + st.Detail
	}
	// JSON carries a byte that is not UTF-8 as U+FFFD, three bytes: the
	// apiserver must get the note it is sent, within its limit.
	note = strings.ToValidUTF8(note, "\uFFFD")
	if len(note) > maxEventNote {
		note = judge.CutRunes(note, maxEventNote-len("...")) + "..."
	}
	// <pod>.<hex time>, as client-go's recorder names events: a
	// generateName prefix may not end with a dot.
	suffix := fmt.Sprintf(".%x", st.SoftStopAt.UnixNano())
	return &eventsv1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: shortName(a.pod.PodName, maxEventName-len(suffix)) + suffix, Namespace: a.pod.Namespace},
		EventTime:           metav1.NewMicroTime(st.SoftStopAt),
		ReportingController: "hapsuper",
		ReportingInstance:   shortName(a.pod.PodName, maxReportingInstance),
		Action:              "Drain",
		Reason:              "DrainEnded",
		Regarding:           corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: a.pod.Namespace, Name: a.pod.PodName},
		Note:                note,
		Type:                typ,
	}
}

// shortName is name (a DNS subdomain, as a pod name is) when it has at most
// n bytes; else its first bytes and a hash of the whole, n bytes in all and
// still a DNS subdomain, so that two long names that share their start
// stay apart.
func shortName(name string, n int) string {
	if len(name) <= n {
		return name
	}
	h := fnv.New32a()
	h.Write([]byte(name))
	hash := fmt.Sprintf("-%08x", h.Sum32())
	// A subdomain's labels end with an alphanumeric: drop the cut's '-'
	// and '.' before the hash.
	return strings.TrimRight(name[:n-len(hash)], "-.") + hash
}
