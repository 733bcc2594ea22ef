package kube

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
)

// request is what the stub apiserver saw.
type request struct {
	method, path, query, accept, contentType string
	body                                     []byte
}

// stubAPIServer answers JSON from routes ("METHOD path" → status, body)
// and records each request.
func stubAPIServer(t *testing.T, routes map[string]func(w http.ResponseWriter)) (*Client, func() []request) {
	t.Helper()
	var mu sync.Mutex
	var seen []request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		seen = append(seen, request{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Get("Accept"), r.Header.Get("Content-Type"), body})
		mu.Unlock()
		route, ok := routes[r.Method+" "+r.URL.Path]
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404,"message":"no route %s %s"}`, r.Method, r.URL.Path)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		route(w)
	}))
	t.Cleanup(srv.Close)
	c, err := NewForConfig(&rest.Config{Host: srv.URL, QPS: 50, Burst: 100, UserAgent: "hapsuper-test"})
	if err != nil {
		t.Fatal(err)
	}
	return c, func() []request {
		mu.Lock()
		defer mu.Unlock()
		return append([]request(nil), seen...)
	}
}

func answer(status int, obj any) func(http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		w.WriteHeader(status)
		json.NewEncoder(w).Encode(obj)
	}
}

// Each request goes to its group's path with its options in the query,
// asks for protobuf first (as client-go's clientset does for these types),
// and decodes the JSON answer into the right type; an apiserver Status is
// an apierrors error that callers can classify.
func TestClientRequests(t *testing.T) {
	pod := &corev1.Pod{TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: "shop", ResourceVersion: "7"}, Spec: corev1.PodSpec{NodeName: "n1"}}
	nodes := &corev1.NodeList{TypeMeta: metav1.TypeMeta{Kind: "NodeList", APIVersion: "v1"},
		ListMeta: metav1.ListMeta{Continue: "next"}, Items: []corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}}}
	forbidden := metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure,
		Reason: metav1.StatusReasonForbidden, Code: http.StatusForbidden, Message: `endpointslices.discovery.k8s.io is forbidden`}
	sar := &authorizationv1.SelfSubjectAccessReview{TypeMeta: metav1.TypeMeta{Kind: "SelfSubjectAccessReview", APIVersion: "authorization.k8s.io/v1"},
		Status: authorizationv1.SubjectAccessReviewStatus{Allowed: true}}
	c, seen := stubAPIServer(t, map[string]func(http.ResponseWriter){
		"GET /api/v1/namespaces/shop/pods/web-0":                       answer(200, pod),
		"GET /api/v1/nodes":                                            answer(200, nodes),
		"GET /apis/discovery.k8s.io/v1/namespaces/shop/endpointslices": answer(403, forbidden),
		"POST /apis/events.k8s.io/v1/namespaces/shop/events":           answer(201, &eventsv1.Event{TypeMeta: metav1.TypeMeta{Kind: "Event", APIVersion: "events.k8s.io/v1"}}),
		"POST /apis/authorization.k8s.io/v1/selfsubjectaccessreviews":  answer(201, sar),
		"GET /version": answer(200, map[string]string{"gitVersion": "v1.37.2"}),
	})
	ctx := t.Context()

	got, err := c.GetPod(ctx, "shop", "web-0")
	if err != nil || got.Spec.NodeName != "n1" || got.ResourceVersion != "7" {
		t.Errorf("GetPod: %+v, %v", got, err)
	}
	list, err := c.ListNodes(ctx, metav1.ListOptions{Limit: 250})
	if err != nil || len(list.Items) != 1 || list.Continue != "next" {
		t.Errorf("ListNodes: %+v, %v", list, err)
	}
	if _, err := c.ListEndpointSlices(ctx, "shop", metav1.ListOptions{ResourceVersion: "0"}); !apierrors.IsForbidden(err) {
		t.Errorf("ListEndpointSlices against a 403 Status: %v, want a Forbidden error", err)
	}
	if err := c.CreateEvent(ctx, &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Name: "web-0.1", Namespace: "shop"}, Note: "drain ended"}); err != nil {
		t.Errorf("CreateEvent: %v", err)
	}
	review, err := c.CreateSelfSubjectAccessReview(ctx, &authorizationv1.SelfSubjectAccessReview{})
	if err != nil || !review.Status.Allowed {
		t.Errorf("CreateSelfSubjectAccessReview: %+v, %v", review, err)
	}
	v, err := c.ServerVersion(ctx)
	if err != nil || v.GitVersion != "v1.37.2" {
		t.Errorf("ServerVersion: %+v, %v", v, err)
	}

	reqs := seen()
	if len(reqs) != 6 {
		t.Fatalf("%d requests, want 6: %+v", len(reqs), reqs)
	}
	if q := reqs[1].query; !strings.Contains(q, "limit=250") {
		t.Errorf("node list query %q, want limit=250", q)
	}
	if q := reqs[2].query; !strings.Contains(q, "resourceVersion=0") {
		t.Errorf("slice list query %q, want resourceVersion=0", q)
	}
	for _, r := range reqs[:5] {
		if !strings.HasPrefix(r.accept, "application/vnd.kubernetes.protobuf") {
			t.Errorf("%s %s: Accept %q, want protobuf first", r.method, r.path, r.accept)
		}
	}
	// The Event travels as protobuf; the apiserver reads it by Content-Type.
	if ct := reqs[3].contentType; ct != "application/vnd.kubernetes.protobuf" {
		t.Errorf("event Content-Type %q", ct)
	}
	if !strings.Contains(string(reqs[3].body), "drain ended") {
		t.Errorf("event body %q does not carry the note", reqs[3].body)
	}
}

// A watch decodes the apiserver's stream of events into typed objects.
func TestClientWatch(t *testing.T) {
	c, seen := stubAPIServer(t, map[string]func(http.ResponseWriter){
		"GET /api/v1/namespaces/shop/services": func(w http.ResponseWriter) {
			w.WriteHeader(200)
			for _, name := range []string{"web", "api"} {
				fmt.Fprintf(w, `{"type":"ADDED","object":{"kind":"Service","apiVersion":"v1","metadata":{"name":%q,"namespace":"shop"}}}`+"\n", name)
			}
			w.(http.Flusher).Flush()
		},
	})
	timeout := int64(30)
	w, err := c.WatchServices(t.Context(), "shop", metav1.ListOptions{ResourceVersion: "5", TimeoutSeconds: &timeout})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for _, want := range []string{"web", "api"} {
		select {
		case ev := <-w.ResultChan():
			svc, ok := ev.Object.(*corev1.Service)
			if ev.Type != watch.Added || !ok || svc.Name != want {
				t.Fatalf("event %s %T %+v, want ADDED Service %s", ev.Type, ev.Object, ev.Object, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no event for %s within 10s", want)
		}
	}
	if q := seen()[0].query; !strings.Contains(q, "watch=true") || !strings.Contains(q, "resourceVersion=5") || !strings.Contains(q, "timeoutSeconds=30") {
		t.Errorf("watch query %q", q)
	}
}
