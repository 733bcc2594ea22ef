package k8s_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hapsuper/hapsuper/test/harness/kube"
	"github.com/hapsuper/hapsuper/test/k8s/k8stest"
)

// A pod whose name has 253 characters, the longest the API allows, is
// drained by the built hapsuper: the apiserver accepts its DrainEnded
// Event (events.k8s.io takes a name that is a DNS subdomain of at most 253
// characters, a reportingInstance of at most 128 and a note of at most
// 1,024 bytes), which regards the pod by its whole name.
func TestDrain_EventLongPodName(t *testing.T) {
	e := newDrainEnv(t, k8stest.Options{Nodes: 1})
	url := e.service(t, "web", false)
	name := strings.Repeat("long-", 49) + "web-abc0" // 245 + 8
	if len(name) != 253 {
		t.Fatalf("pod name of %d characters, want 253", len(name))
	}
	a := e.startLongNamedPod(t, 1, name, "web")
	b := e.startPodWith(t, 1, "web-b", "web", podOptions{})
	a.ready(t)
	b.ready(t)
	e.waitRouted(t, url, map[int][]string{1: {name, "web-b"}})

	a.terminate(t)
	r := a.ended(t, true)
	if r.Reason == "" {
		t.Fatalf("no drain reason in hapsuper's log")
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	list, err := e.H.Client.EventsV1().Events(k8stest.PodNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list Events: %v", err)
	}
	found := false
	for _, ev := range list.Items {
		if ev.Reason != "DrainEnded" || ev.Regarding.Name != name {
			continue
		}
		found = true
		t.Logf("Event %s (%d characters), reportingInstance %s (%d): %s", ev.Name, len(ev.Name), ev.ReportingInstance, len(ev.ReportingInstance), ev.Note)
		if !strings.HasPrefix(ev.Note, "drain ended "+r.Reason) {
			t.Errorf("note %q, want it to say the drain ended %s", ev.Note, r.Reason)
		}
	}
	if !found {
		var refused []string
		for _, l := range a.All("drain event not recorded") {
			refused = append(refused, l.Str("err"))
		}
		t.Errorf("no Event DrainEnded regards the pod of 253 characters; hapsuper's refusals: %q", refused)
	}
}

// startLongNamedPod is startPodWith's default pod for a name too long to
// be a directory in a unix socket's path (at most 108 bytes): the pod's
// files are under "long-name".
func (e *drainEnv) startLongNamedPod(t *testing.T, node int, name, app string) *hapPod {
	t.Helper()
	pod := e.H.AddPod(t, node, name, map[string]string{"app": app})
	dir := e.PodDir(t, "long-name")
	cfg := filepath.Join(dir, "haproxy.cfg")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, haproxyCfg, pod.IP, name), 0o644); err != nil {
		t.Fatal(err)
	}
	var p *hapPod
	t.Cleanup(func() {
		if p != nil && t.Failed() {
			t.Logf("hapsuper log of the pod of 253 characters ends:\n%s", p.Tail(40))
		}
	})
	c := e.StartHapsuper(t, pod, dir, kube.Hapsuper{Routing: "kube-proxy", Grace: drainGrace, QuietPeriod: drainQuiet, Config: cfg})
	p = &hapPod{Container: c, e: e, observed: true}
	return p
}
