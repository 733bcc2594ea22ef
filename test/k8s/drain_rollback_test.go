package k8s_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/hapsuper/hapsuper/test/k8s/k8stest"
)

// A rollout rolled back mid-way. Old pods web-a (node1) and web-b (node2)
// and new pods web-c (node1) and web-d (node2) are Ready; the old ones are
// deleted (the rollout goes on), and 100 ms later the rollout is undone:
// replacements of the old version, web-e and web-f, turn Ready and the new
// pods are deleted 20 ms after that. Four drains overlap with a burst of
// slice changes whose kube-proxy syncs run into one another. A ready pod
// exists on every node throughout, so every drain must end routed-away
// (none waits for the bound), none may log routing withdrawn while a node
// still sends it new connections, and no client request fails.
func TestDrain_RollbackMidRollout(t *testing.T) {
	e := newDrainEnv(t, k8stest.Options{Nodes: 2})
	url := e.service(t, "web", false)
	old := []*hapPod{e.startPod(t, 1, "web-a", "web"), e.startPod(t, 2, "web-b", "web")}
	fresh := []*hapPod{e.startPod(t, 1, "web-c", "web"), e.startPod(t, 2, "web-d", "web")}
	for _, p := range slices.Concat(old, fresh) {
		p.ready(t)
	}
	back := []*k8stest.Pod{e.H.AddPod(t, 1, "web-e", map[string]string{"app": "web"}), e.H.AddPod(t, 2, "web-f", map[string]string{"app": "web"})}
	for _, p := range back {
		p.ServeHTTP(t, 8080, nil)
	}
	all := []string{"web-a", "web-b", "web-c", "web-d"}
	e.waitRouted(t, url, map[int][]string{1: all, 2: all})
	tr := startTraffic(t, url, e.H.Nodes(), nil)
	time.Sleep(700 * time.Millisecond) // with startTraffic's 500 ms: past kube-proxy's minSyncPeriod since the last change

	for _, p := range old {
		p.terminate(t)
	}
	time.Sleep(100 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, p := range back {
		if err := e.H.SetPodReady(ctx, p, true); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(20 * time.Millisecond)
	for _, p := range fresh {
		p.terminate(t)
	}

	var drained []drainRecord
	for _, p := range slices.Concat(old, fresh) {
		drained = append(drained, p.ended(t, true))
	}
	time.Sleep(300 * time.Millisecond)
	tr.Stop()
	t.Logf("clients: %s", tr.summary())
	checkNoFailures(t, tr, time.Time{})
	for _, r := range drained {
		checkReason(t, r, "routed-away")
		checkNoDNATAfterWithdrawn(t, tr, r)
	}
}
