package k8s_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/hapsuper/hapsuper/test/harness"
	"github.com/hapsuper/hapsuper/test/harness/kube"
	"github.com/hapsuper/hapsuper/test/k8s/k8stest"
)

// realPodImage is the image hack/image.sh builds and the name it carries in
// its archive.
const realPodImage = "localhost/hapsuper-haproxy:latest"

// realPodConfig replaces the example's haproxy.cfg: the example's backend
// resolves a Service through cluster DNS, which the harness has not; here
// the traffic frontend answers itself, with the pod's name. The drain's
// settings are the example's.
const realPodConfig = `defaults
    mode http
    timeout connect 5s
    timeout client 30s
    timeout server 30s
    timeout http-keep-alive 10s
    option idle-close-on-response
    timeout client-fin 5s

frontend web
    bind :8080
    http-request return status 200 content-type text/plain lf-string "%[env(POD_NAME)]"

frontend probe
    bind :8081
    monitor-uri /healthz
`

// imageArchive returns the archive hack/image.sh wrote. The test fails
// without it: CI builds it, and `bash hack/image.sh` builds it here.
func imageArchive(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the kubelet node needs root (network namespaces, containers)")
	}
	dir := os.Getenv("HAPSUPER_IMAGE_CACHE")
	if dir == "" {
		dir = "/var/cache/hapsuper/image"
	}
	p := filepath.Join(dir, "hapsuper-haproxy.oci.tar")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("the image archive is missing: %v (build it with `bash hack/image.sh`)", err)
	}
	return p
}

// The Dockerfile's image, run by a real kubelet (containerd, runc) as the
// kube-proxy overlay of deploy/ describes it (2 replicas, routing
// kube-proxy, downward API, projected token, emptyDir for the sockets), is
// rolled (`kubectl rollout restart`) and scaled down while clients on two
// other nodes send requests through the ClusterIP, each on a new
// connection. No scheduler runs: the pod template is pinned to the kubelet's
// node with nodeName.
//
// Every request succeeds; every pod the kubelet stops drains with
// routed-away after the image's STOPSIGNAL (SIGUSR1, not the kubelet's
// default SIGTERM) and its container exits 0 before the grace period;
// `hapsuper status --json`, run through the CRI's exec while the pod
// drains, says draining; hapsuper was pid 1 of the container and HAProxy
// ran as the image's user (uid 99); the container's cgroup is empty after
// it exited.
func TestRealPod_Rollout(t *testing.T) {
	began := time.Now()
	h, ctx, pods := startRealPods(t, 3, 8*time.Minute, 2, nil)
	t.Logf("deployment available with 2 pods %v after the cluster started", time.Since(began).Round(time.Millisecond))

	svc, err := h.Client.CoreV1().Services(realPodNS).Get(ctx, "haproxy", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + svc.Spec.ClusterIP + ":80/"
	tr := harness.NewTraffic(nil)
	for _, n := range h.Nodes()[1:] {
		waitSeen(t, n, url, 30*time.Second) // the node's kube-proxy has programmed the first ready pods
		tr.Every(n.Name, n.HTTPClient(5*time.Second), url, 20*time.Millisecond, false)
	}
	defer tr.Stop()
	time.Sleep(2 * time.Second)

	rolled := time.Now()
	restart := fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{"kubectl.kubernetes.io/restartedAt":%q}}}}}`, time.Now().Format(time.RFC3339))
	if _, err := h.Client.AppsV1().Deployments(realPodNS).Patch(ctx, "haproxy", types.StrategicMergePatchType, []byte(restart), metav1.PatchOptions{}); err != nil {
		t.Fatalf("rollout restart: %v", err)
	}
	waitRollout(ctx, t, h, realPodNS, 2)
	t.Logf("rollout restart of 2 pods done in %v", time.Since(rolled).Round(time.Millisecond))

	scaled := time.Now()
	if _, err := h.Client.AppsV1().Deployments(realPodNS).Patch(ctx, "haproxy", types.MergePatchType, []byte(`{"spec":{"replicas":1}}`), metav1.PatchOptions{}); err != nil {
		t.Fatalf("scale down: %v", err)
	}
	waitRollout(ctx, t, h, realPodNS, 1)
	t.Logf("scale-down to 1 done in %v", time.Since(scaled).Round(time.Millisecond))
	time.Sleep(time.Second)
	tr.Stop()

	pods.stop() // every stopped pod's log has ended; the last pod's stream ends here
	checkRequests(t, tr.Outcomes())
	checkRealPods(t, pods, 3)
	t.Logf("scenario wall time %v", time.Since(began).Round(time.Millisecond))
}

// realPodNS is the namespace startRealPods installs the overlay in.
const realPodNS = "hapsuper"

// startRealPods starts a cluster of nodes whose node1 runs a kubelet,
// imports the image, applies realPodObjects in realPodNS (edit, if any,
// changes the Deployment first), watches its pods and waits until
// replicas of them are ready. ctx ends at the test's cleanup or after
// timeout.
func startRealPods(t *testing.T, nodes int, timeout time.Duration, replicas int32, edit func(*unstructured.Unstructured)) (*k8stest.Harness, context.Context, *podWatch) {
	t.Helper()
	archive := imageArchive(t)
	h := k8stest.Start(t, k8stest.Options{Nodes: nodes, KubeletNode: 1})
	kubelet := h.Kubelet()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	importAt := time.Now()
	if err := kubelet.Containerd.Import(ctx, archive); err != nil {
		t.Fatal(err)
	}
	t.Logf("image imported in %v", time.Since(importAt).Round(time.Millisecond))
	createNamespace(ctx, t, h, realPodNS)
	a := kube.NewApplier(t, h)
	for _, obj := range realPodObjects(t, kubelet.Node.Name) {
		if edit != nil && obj.GetKind() == "Deployment" {
			edit(obj)
		}
		if err := a.Apply(ctx, obj, false); err != nil {
			t.Fatal(err)
		}
	}
	pods := watchPods(ctx, t, h, realPodNS)
	waitRollout(ctx, t, h, realPodNS, replicas)
	return h, ctx, pods
}

// realPodObjects renders deploy/overlays/kube-proxy and adapts it to the
// harness: the image built here (never pulled), the pods pinned to the
// kubelet's node, and realPodConfig as haproxy.cfg.
func realPodObjects(t *testing.T, node string) []*unstructured.Unstructured {
	t.Helper()
	r := kube.Render(t, filepath.Join(kube.DeployDir(t), "overlays", "kube-proxy"))
	for i, obj := range r.Objects {
		switch obj.GetKind() {
		case "ConfigMap":
			if err := unstructured.SetNestedField(obj.Object, realPodConfig, "data", "haproxy.cfg"); err != nil {
				t.Fatal(err)
			}
		case "Deployment":
			var d appsv1.Deployment
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &d); err != nil {
				t.Fatal(err)
			}
			d.Spec.Template.Spec.NodeName = node
			c := &d.Spec.Template.Spec.Containers[0]
			c.Image = realPodImage
			c.ImagePullPolicy = corev1.PullNever
			u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&d)
			if err != nil {
				t.Fatal(err)
			}
			r.Objects[i] = &unstructured.Unstructured{Object: u}
		}
	}
	return r.Objects
}

// waitRollout waits until the Deployment's newest ReplicaSet has want ready
// pods and no other pod of the namespace is left (stopped and removed by
// the kubelet).
func waitRollout(ctx context.Context, t *testing.T, h *k8stest.Harness, ns string, want int32) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	var last string
	for time.Now().Before(deadline) {
		d, err := h.Client.AppsV1().Deployments(ns).Get(ctx, "haproxy", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		list, err := h.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s := d.Status
		last = fmt.Sprintf("generation %d observed %d, updated %d, ready %d, available %d, pods %d",
			d.Generation, s.ObservedGeneration, s.UpdatedReplicas, s.ReadyReplicas, s.AvailableReplicas, len(list.Items))
		if s.ObservedGeneration == d.Generation && s.UpdatedReplicas == want && s.ReadyReplicas == want &&
			s.AvailableReplicas == want && s.Replicas == want && int32(len(list.Items)) == want {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("wait for the rollout to %d pods: %s after 3m; kubelet log ends:\n%s", want, last, h.Kubelet().LogTail(30))
}

// checkRequests fails on any request that did not get a 200, and says how
// many were sent, by answering pod.
func checkRequests(t *testing.T, outcomes []harness.Outcome) {
	t.Helper()
	byPod := map[string]int{}
	var failed []string
	for _, o := range outcomes {
		if o.Kind != harness.KindOK {
			failed = append(failed, o.String())
			continue
		}
		byPod[o.Pod]++
	}
	t.Logf("requests: %d sent, %d failed; answered by pod: %v", len(outcomes), len(failed), byPod)
	if len(outcomes) < 100 {
		t.Errorf("only %d requests were sent: the clients did not run", len(outcomes))
	}
	if len(failed) > 0 {
		t.Errorf("%d of %d requests failed:\n%s", len(failed), len(outcomes), strings.Join(failed, "\n"))
	}
	if len(byPod) < 3 {
		t.Errorf("requests were answered by %d pods, want the 2 first and the 2 new ones (at least 3 seen): %v", len(byPod), byPod)
	}
}

// checkRealPods checks every pod the kubelet stopped (want of them: the 2
// rolled and the 1 scaled away), and that every pod ran hapsuper as pid 1
// with HAProxy as uid 99.
func checkRealPods(t *testing.T, w *podWatch, want int) {
	t.Helper()
	stopped := 0
	for _, p := range w.all() {
		p.mu.Lock()
		pr, inspectErr := p.processes, p.inspectErr
		deleted, grace, term, gone := p.deletedAt, p.grace, p.terminated, p.gone
		status, statusErr := p.status, p.statusErr
		p.mu.Unlock()
		t.Logf("pod %s: pid 1 %q (pid %s in its namespace), haproxy %v, cgroup %s, tcp_max_tw_buckets %s", p.name, pr.pid1Comm, pr.nsPID, pr.haproxy, pr.cgroupDir, pr.twBuckets)
		if inspectErr != nil {
			t.Errorf("pod %s: read its processes: %v", p.name, inspectErr)
		}
		if pr.pid1Comm != "hapsuper" || pr.nsPID != "1" {
			t.Errorf("pod %s: the container's first process is %q, pid %s in its namespace: want hapsuper as pid 1", p.name, pr.pid1Comm, pr.nsPID)
		}
		if pr.twBuckets != "0" {
			t.Errorf("pod %s: net.ipv4.tcp_max_tw_buckets is %q in its network namespace, want 0 (the harness's CNI tuning): its TIME_WAIT sockets can refuse a new connection", p.name, pr.twBuckets)
		}
		if len(pr.haproxy) < 2 {
			t.Errorf("pod %s: HAProxy processes under hapsuper: %v, want the master and a worker", p.name, pr.haproxy)
		}
		for _, hp := range pr.haproxy {
			if !strings.HasPrefix(hp, "haproxy ") || !strings.HasSuffix(hp, " uid=99") {
				t.Errorf("pod %s: process %q under hapsuper: want haproxy as uid 99 (the image's user)", p.name, hp)
			}
		}
		if deleted.IsZero() {
			continue
		}
		stopped++
		if !gone {
			t.Errorf("pod %s: deleted at %s but never removed", p.name, deleted.Format(time.RFC3339))
		}
		p.log.WaitRead(10 * time.Second)
		checkStopped(t, p, pr.cgroupDir, grace, term, status, statusErr)
	}
	if stopped != want {
		t.Errorf("%d pods were stopped, want %d (2 rolled, 1 scaled away)", stopped, want)
	}
}

// checkStopped checks one stopped pod: the signal hapsuper got, the drain's
// reason, the status seen through exec, the exit code and time, and the
// cgroup left behind.
func checkStopped(t *testing.T, p *realPod, cgroupDir string, grace int64, term *corev1.ContainerStateTerminated, status string, statusErr error) {
	t.Helper()
	started, ok := p.log.Find("drain started", nil)
	if !ok {
		t.Errorf("pod %s: no drain started in its log; it ends:\n%s", p.name, p.log.Tail(20))
		return
	}
	if sig := started.Str("signal"); sig != "SIGUSR1" {
		t.Errorf("pod %s: the drain started on %s, want the image's STOPSIGNAL SIGUSR1", p.name, sig)
	}
	ended, ok := p.log.Find("drain ended", nil)
	switch {
	case !ok:
		t.Errorf("pod %s: no drain ended in its log; it ends:\n%s", p.name, p.log.Tail(20))
	case ended.Str("reason") != "routed-away":
		t.Errorf("pod %s: drain ended %s (%s), want routed-away", p.name, ended.Str("reason"), ended.Str("detail"))
	default:
		t.Logf("pod %s: SIGUSR1, drain %s (%s) after %v", p.name, ended.Str("reason"), ended.Str("detail"), ended.At.Sub(started.At).Round(time.Millisecond))
	}
	if statusErr != nil {
		t.Errorf("pod %s: hapsuper status --json through exec while draining: %v", p.name, statusErr)
	} else {
		var st struct {
			Phase string `json:"phase"`
		}
		if err := json.Unmarshal([]byte(status), &st); err != nil {
			t.Errorf("pod %s: hapsuper status --json printed %q: %v", p.name, status, err)
		} else if st.Phase != "draining" {
			t.Errorf("pod %s: hapsuper status --json through exec said phase %q, want draining: %s", p.name, st.Phase, status)
		} else {
			t.Logf("pod %s: hapsuper status --json through exec: phase %s", p.name, st.Phase)
		}
	}
	if term == nil {
		t.Errorf("pod %s: the kubelet never reported its container terminated", p.name)
	} else {
		took := term.FinishedAt.Sub(started.At)
		t.Logf("pod %s: exit code %d, %v after the stop signal (grace %ds)", p.name, term.ExitCode, took.Round(time.Second), grace)
		if term.ExitCode != 0 || term.Reason == "OOMKilled" {
			t.Errorf("pod %s: container exited %d (%s), want 0", p.name, term.ExitCode, term.Reason)
		}
		if grace > 0 && took >= time.Duration(grace)*time.Second {
			t.Errorf("pod %s: container exited %v after the stop signal, not before the grace period (%ds)", p.name, took, grace)
		}
	}
	if cgroupDir == "" {
		t.Errorf("pod %s: its cgroup was never read", p.name)
	} else if left, err := cgroupProcs(cgroupDir); err != nil || left != "" {
		t.Errorf("pod %s: processes left in its cgroup %s after exit: %q (%v)", p.name, cgroupDir, left, err)
	}
}
