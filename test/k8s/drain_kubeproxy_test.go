package k8s_test

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hapsuper/hapsuper/test/harness"
	"github.com/hapsuper/hapsuper/test/k8s/k8stest"
)

// twoPods is the common start: Service web, hapsuper pod web-a on node1
// (the one drained), hapsuper pod web-b on node2, both Ready and reached
// from both nodes. po, if given, are web-a's and web-b's options.
func twoPods(t *testing.T, opts k8stest.Options, po ...podOptions) (e *drainEnv, url string, a, b *hapPod) {
	t.Helper()
	po = append(po, podOptions{}, podOptions{})
	e = newDrainEnv(t, opts)
	url = e.service(t, "web", false)
	a = e.startPodWith(t, 1, "web-a", "web", po[0])
	b = e.startPodWith(t, 2, "web-b", "web", po[1])
	a.ready(t)
	b.ready(t)
	e.waitRouted(t, url, map[int][]string{1: {"web-a", "web-b"}, 2: {"web-a", "web-b"}})
	return e, url, a, b
}

// kube-proxy on node2 is frozen (SIGSTOP) right at the delete of web-a and
// thawed 4 s later; node2's client pauses 2.5 s, longer than the quiet
// period, and then sends again into node2's stale rules, which still pick
// web-a. hapsuper must hold the drain (node2 accepts healthz connections but
// does not answer: pending) until node2 has synced after the thaw: every
// request succeeds, and the drain ends routed-away after the thaw.
func TestDrain_FrozenKubeProxy(t *testing.T) {
	e, url, a, _ := twoPods(t, k8stest.Options{Nodes: 2})
	const pauseFrom, pauseTo, thawAfter = 300 * time.Millisecond, 2800 * time.Millisecond, 4 * time.Second
	var deleted atomic.Int64 // unix nanoseconds of the delete, 0 before
	pause := func(node string, now time.Time) bool {
		d := deleted.Load()
		if node != "node2" || d == 0 {
			return false
		}
		since := now.Sub(time.Unix(0, d))
		return since >= pauseFrom && since < pauseTo
	}
	tr := startTraffic(t, url, e.H.Nodes(), pause)

	kp := e.H.KubeProxy(2)
	if err := kp.Freeze(); err != nil {
		t.Fatal(err)
	}
	deleted.Store(time.Now().UnixNano())
	a.terminate(t)
	time.Sleep(time.Until(a.deletedAt.Add(thawAfter)))
	if a.Exited() {
		t.Fatalf("hapsuper of web-a exited while node2's kube-proxy was frozen:\n%s", a.Tail(20))
	}
	if err := kp.Thaw(); err != nil {
		t.Fatal(err)
	}
	thawed := time.Now()
	r := a.afterStop(t, tr, true)

	resumed := time.Unix(0, deleted.Load()).Add(pauseTo)
	stale := tr.Where(func(o harness.Outcome) bool {
		return o.Node == "node2" && o.Pod == "web-a" && !o.Sent.Before(resumed) && o.Sent.Before(thawed)
	})
	t.Logf("thaw +%v; drain ended %v after the thaw; node2 sent %d requests to web-a between its resume and the thaw",
		thawed.Sub(a.deletedAt).Round(time.Millisecond), r.Ended.Sub(thawed).Round(time.Millisecond), len(stale))
	checkNoFailures(t, tr, time.Time{})
	checkReason(t, r, "routed-away")
	if !r.Ended.After(thawed) {
		t.Errorf("drain ended %v before node2's kube-proxy was thawed", thawed.Sub(r.Ended))
	}
	if len(stale) == 0 {
		t.Errorf("node2's stale rules sent nothing to web-a after the pause: the scenario did not test the pause")
	}
	checkNoDNATAfterWithdrawn(t, tr, r)
}

// kube-proxy on node2 is cut off from the apiserver (both directions,
// inside node2's namespace, kube-proxy's own traffic only): its healthz
// keeps answering 200 with a frozen lastUpdated and its rules stay stale.
// The drain of web-a never reaches routing withdrawn and ends at the bound,
// naming node2; no request sent before the drain ended fails.
func TestDrain_PartitionedKubeProxy(t *testing.T) {
	e, url, a, _ := twoPods(t, k8stest.Options{Nodes: 2})
	tr := startTraffic(t, url, e.H.Nodes(), nil)
	api := e.H.APIServer().Addr()
	e.nft(t, 2, fmt.Sprintf(`table ip hapsuper-partition {
	chain in { type filter hook input priority -10; policy accept; ip saddr %s drop; }
	chain out { type filter hook output priority -10; policy accept; ip daddr %s drop; }
}
`, api, api))
	r := a.drainUnder(t, tr, true)

	refused := tr.Where(func(o harness.Outcome) bool { return o.Kind != harness.KindOK && !o.Sent.Before(r.Ended) })
	t.Logf("after the drain ended, %d requests failed (node2's stale rules still pick web-a)", len(refused))
	checkNoFailuresBeforeBound(t, tr, r)
	checkReason(t, r, "bound")
	if !strings.Contains(r.Detail, "node2") || strings.Contains(r.Detail, "node1:") {
		t.Errorf("drain detail %q: want node2 named as pending, and node1 not", r.Detail)
	}
	if !r.Withdrawn.IsZero() {
		t.Errorf("hapsuper logged routing withdrawn at +%v although node2's kube-proxy never synced", r.Withdrawn.Sub(r.deleted))
	}
	if d := r.Ended.Sub(r.term); d < drainBound-200*time.Millisecond || d > drainBound+time.Second {
		t.Errorf("drain ended %v after SIGTERM: want the bound, %v", d, drainBound)
	}
}

// node2's kube-proxy healthz port refuses connections (a reject rule in
// node2's namespace; kube-proxy itself keeps syncing): node2 cannot be
// observed, so the drain ends unverified naming node2 once the clients of
// both nodes have gone quiet on web-a; nothing fails.
func TestDrain_HealthzUnreachable(t *testing.T) {
	e, url, a, _ := twoPods(t, k8stest.Options{Nodes: 2})
	e.nft(t, 2, fmt.Sprintf(`table ip hapsuper-nohealthz {
	chain in { type filter hook input priority -10; policy accept; tcp dport %d reject with tcp reset; }
}
`, k8stest.HealthzPort))
	tr := startTraffic(t, url, e.H.Nodes(), nil)
	r := a.drainUnder(t, tr, true)

	checkNoFailures(t, tr, time.Time{})
	checkReason(t, r, "unverified")
	if !strings.Contains(r.Detail, "node2") || strings.Contains(r.Detail, "node1:") {
		t.Errorf("drain detail %q: want node2 named as not observed, and node1 not", r.Detail)
	}
	if late := tr.answeredBy("web-a", r.Ended); len(late) > 0 {
		t.Errorf("%d requests sent after the drain ended reached web-a:%s", len(late), harness.Describe(late, 5))
	}
}
