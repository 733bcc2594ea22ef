package k8s_test

import (
	"strings"
	"testing"
	"time"

	"github.com/hapsuper/hapsuper/test/harness"
	"github.com/hapsuper/hapsuper/test/k8s/k8stest"
	corev1 "k8s.io/api/core/v1"
)

// Pods with a path that kube-proxy does not carry: web-a runs with
// hostNetwork (the node's address reaches it directly), web-c carries the
// readiness gate of the AWS Load Balancer Controller (a load balancer
// targets its IP). kube-proxy confirms their withdrawal on both nodes, but
// the drain must not say routed-away: it ends unverified, naming the path.
// Nothing fails.
func TestDrain_UnobservedPaths(t *testing.T) {
	e := newDrainEnv(t, k8stest.Options{Nodes: 2})
	url := e.service(t, "web", false)
	a := e.startPodWith(t, 1, "web-a", "web", podOptions{edit: func(p *corev1.Pod) { p.Spec.HostNetwork = true }})
	const gate = "target-health.elbv2.k8s.aws/k8s-default-web-0123456789"
	c := e.startPodWith(t, 1, "web-c", "web", podOptions{edit: func(p *corev1.Pod) {
		p.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: gate}}
	}})
	b := e.startPod(t, 2, "web-b", "web")
	for _, p := range []*hapPod{a, b, c} {
		p.ready(t)
	}
	e.waitRouted(t, url, map[int][]string{1: {"web-a", "web-b", "web-c"}, 2: {"web-a", "web-b", "web-c"}})

	tr := startTraffic(t, url, e.H.Nodes(), nil)
	for _, tc := range []struct {
		pod  *hapPod
		path string
	}{
		{a, "hostNetwork: the node's address reaches the pod without kube-proxy"},
		{c, "readiness gate " + gate + ": a load balancer targets the pod's IP"},
	} {
		tc.pod.terminate(t)
		r := tc.pod.ended(t, true)
		checkReason(t, r, "unverified")
		if !strings.Contains(r.Detail, "confirmed by kube-proxy on 2 nodes") || !strings.Contains(r.Detail, "not observed: "+tc.path) {
			t.Errorf("%s: drain detail %q: want kube-proxy confirmed on both nodes and %q named as not observed", r.pod, r.Detail, tc.path)
		}
		if w, ok := tc.pod.Find("routing", func(l harness.Entry) bool { return l.Str("state") == "withdrawn" }); ok {
			t.Errorf("%s: routing logged withdrawn at %v although %q was not observed", r.pod, w.At, tc.path)
		}
	}
	time.Sleep(300 * time.Millisecond)
	tr.Stop()
	t.Logf("clients: %s", tr.summary())
	checkNoFailures(t, tr, time.Time{})
}

// --routing endpointslices says withdrawn on the API alone: the drain ends
// withdrawn-in-api, in the log and in the DrainEnded Event, never
// routed-away. --routing auto, with the kube-proxy overlay's grants and
// kube-proxy's healthz reachable, picks kube-proxy and says why.
func TestDrain_APIOnlyAndAuto(t *testing.T) {
	e, url, a, b := twoPods(t, k8stest.Options{Nodes: 2}, podOptions{routing: "endpointslices"}, podOptions{routing: "auto"})

	picked, ok := b.Find("routing mode picked", nil)
	if !ok || picked.Str("mode") != "kube-proxy" {
		t.Errorf("web-b (--routing auto): routing mode picked %q (%s), want kube-proxy", picked.Str("mode"), picked.Str("why"))
	} else {
		t.Logf("web-b: auto picked %s: %s", picked.Str("mode"), picked.Str("why"))
	}

	tr := startTraffic(t, url, e.H.Nodes(), nil)
	r := a.drainUnder(t, tr, true)
	checkNoFailures(t, tr, time.Time{})
	checkReason(t, r, "withdrawn-in-api")
	if note, ok := e.drainEvent(t, "web-a"); !ok || !strings.Contains(note, "drain ended withdrawn-in-api") {
		t.Errorf("Event DrainEnded on web-a: %q (found %v), want it to say withdrawn-in-api", note, ok)
	}
}
