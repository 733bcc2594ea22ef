package k8s_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hapsuper/hapsuper/test/harness"
	"github.com/hapsuper/hapsuper/test/k8s/k8stest"
)

// A rollout of pods that run as HAProxy Technologies' images do under
// hapsuper (deploy/haproxytech-ingress): hapsuper starts the stand-in
// controller beside HAProxy (--companion), which reloads HAProxy over the
// master socket every second, as a controller does on changes. Old pods
// web-a (node1) and web-b (node2) serve; a new pod per node turns Ready and
// the old one on that node is deleted, one node after the other, with
// clients on both nodes through the ClusterIP (routing kube-proxy). No
// request fails; both old pods' drains end routed-away, each with its
// controller's reloads landing before the drain, the controller stopped
// before the soft stop and no reload begun after it, and hapsuper exits 0.
func TestHAProxyTech_Rollout(t *testing.T) {
	e := newDrainEnv(t, k8stest.Options{Nodes: 2})
	url := e.service(t, "web", false)
	standin, err := harness.BuildStandinController(e.Dir, "standin-controller")
	if err != nil {
		t.Fatal(err)
	}
	start := func(node int, name string) *hapPod {
		return e.startPodWith(t, node, name, "web", podOptions{flags: companionFlags(t, e, name, standin)})
	}
	old := []*hapPod{start(1, "web-a"), start(2, "web-b")}
	for _, p := range old {
		p.ready(t)
		p.waitControllerReloads(t, 2)
	}
	e.waitRouted(t, url, map[int][]string{1: {"web-a", "web-b"}, 2: {"web-a", "web-b"}})
	tr := startTraffic(t, url, e.H.Nodes(), nil)
	time.Sleep(700 * time.Millisecond) // with startTraffic's 500 ms: past kube-proxy's minSyncPeriod since the last change

	var drained []drainRecord
	for i, p := range old {
		n := start(i+1, fmt.Sprintf("web-%c", 'c'+i))
		n.ready(t)
		time.Sleep(1200 * time.Millisecond) // the new pod routed on every node
		p.terminate(t)
		drained = append(drained, p.ended(t, true))
	}
	time.Sleep(300 * time.Millisecond)
	tr.Stop()
	t.Logf("clients: %s", tr.summary())
	checkNoFailures(t, tr, time.Time{})
	for i, r := range drained {
		checkReason(t, r, "routed-away")
		old[i].checkCompanionStoppedBeforeSoftStop(t)
	}
}

// companionFlags are the flags of a pod that runs the stand-in controller
// beside HAProxy: --companion is a script that gives the controller its
// environment (the pod's master socket, an events directory, a reload
// every second), --haproxy-command HAProxy's command (the pod's
// configuration, which startPodWith writes), a 1 s kill delay (the drain's
// share keeps the rest). StartHapsuper's words after -- become the
// controller's args, which it records and ignores.
func companionFlags(t *testing.T, e *drainEnv, name, standin string) []string {
	t.Helper()
	dir := e.PodDir(t, name)
	events := filepath.Join(dir, "standin")
	if err := os.MkdirAll(events, 0o755); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(dir, "controller.sh")
	body := fmt.Sprintf("#!/bin/sh\nexport STANDIN_MASTER_SOCKET=%s STANDIN_DIR=%s STANDIN_INTERVAL=1s\nexec %s \"$@\"\n",
		filepath.Join(dir, "master.sock"), events, standin)
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return []string{
		"--companion", script,
		"--haproxy-command", "/usr/sbin/haproxy -f " + filepath.Join(dir, "haproxy.cfg"),
		"--companion-kill-delay", "1s",
	}
}

// waitControllerReloads waits until hapsuper logged n reloads from the
// master CLI (the controller's) as landed.
func (p *hapPod) waitControllerReloads(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		got := 0
		for _, l := range p.All("haproxy reloaded") {
			if l.Str("origin") == "master CLI" {
				got++
			}
		}
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pod %s: %d controller reloads landed within 15s, want %d; log:\n%s", p.Name, got, n, p.Tail(30))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// checkCompanionStoppedBeforeSoftStop asserts that hapsuper logged the
// controller stopped before the soft stop, and that HAProxy began no reload
// after it ("Reloading HAProxy", the master's own line). A reload the
// controller began before it was stopped may land after the soft stop: it
// is logged, not failed.
func (p *hapPod) checkCompanionStoppedBeforeSoftStop(t *testing.T) {
	t.Helper()
	var msgs []string
	for _, l := range p.Lines() {
		softStopped := slices.Contains(msgs, "soft stop")
		switch m := l.Msg; {
		case m == "companion stopped", m == "soft stop":
			msgs = append(msgs, m)
		case m == "haproxy" && strings.Contains(l.Str("line"), "Reloading HAProxy") && softStopped:
			t.Errorf("pod %s: HAProxy began a reload after the soft stop: %v", p.Name, l.Fields)
		case m == "haproxy reloaded" && softStopped:
			t.Logf("pod %s: a reload begun before the soft stop landed after it: %v", p.Name, l.Fields)
		}
	}
	if !slices.Equal(msgs, []string{"companion stopped", "soft stop"}) {
		t.Errorf("pod %s: logged %s, want the companion stopped, then the soft stop", p.Name, strings.Join(msgs, ", "))
	}
}
