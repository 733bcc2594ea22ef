package k8s_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/hapsuper/hapsuper/test/harness"
	"github.com/hapsuper/hapsuper/test/harness/kube"
	"github.com/hapsuper/hapsuper/test/k8s/k8stest"
)

// realSidecarGatePort is the sidecar's HTTP gate in the real pod.
const realSidecarGatePort = 8406

// realUnhealthy is the file whose presence fails the HAProxy container's
// liveness probe once (on the shared emptyDir, writable by uid 99).
const realUnhealthy = "/var/run/hapsuper/unhealthy"

// realSidecarImage is the Dockerfile's sidecar target as hack/image.sh
// builds it, and the name it carries in its archive.
const realSidecarImage = "localhost/hapsuper-sidecar:latest"

// sidecarArchive returns the sidecar image's archive, beside the main
// image's; the test fails without it (hack/image.sh writes both).
func sidecarArchive(t *testing.T) string {
	t.Helper()
	p := filepath.Join(filepath.Dir(imageArchive(t)), "hapsuper-sidecar.oci.tar")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("the sidecar image's archive is missing: %v (build it with `bash hack/image.sh`)", err)
	}
	return p
}

// sidecarPodObjects renders deploy/overlays/sidecar (the official image's
// Deployment with hapsuper as a native sidecar) and adapts it to the
// harness: the sidecar runs the sidecar image built here (hapsuper alone),
// the HAProxy container the main image (never pulled), which holds HAProxy
// and hapsuper: it runs HAProxy itself, as the overlay says, and nothing of
// hapsuper's. Its preStop hook is the
// httpGet on the sidecar's HTTP gate (the stand-in image has no socat for
// the overlay's exec hook). The pods are pinned to the kubelet's node and
// use realPodConfig.
func sidecarPodObjects(t *testing.T, node string) []*unstructured.Unstructured {
	t.Helper()
	r := kube.Render(t, filepath.Join(kube.DeployDir(t), "overlays", "sidecar"))
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
			spec := &d.Spec.Template.Spec
			spec.NodeName = node
			grace := int64(20)
			spec.TerminationGracePeriodSeconds = &grace
			hap, sc := &spec.Containers[0], &spec.InitContainers[0]
			hap.Image, hap.ImagePullPolicy = realPodImage, corev1.PullNever
			hap.Lifecycle.PreStop = &corev1.LifecycleHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/gate", Port: intstr.FromInt32(realSidecarGatePort)}}
			// Fails once when the test leaves realUnhealthy: a liveness kill.
			hap.LivenessProbe = &corev1.Probe{
				ProbeHandler:  corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"sh", "-c", "if [ -e " + realUnhealthy + " ]; then rm -f " + realUnhealthy + "; exit 1; fi"}}},
				PeriodSeconds: 1, FailureThreshold: 1,
			}
			sc.Image, sc.ImagePullPolicy = realSidecarImage, corev1.PullNever
			sc.Args = []string{"--gate-addr", fmt.Sprintf(":%d", realSidecarGatePort)}
			for j, e := range sc.Env {
				if e.Name == "HAPSUPER_GRACE_PERIOD" {
					sc.Env[j].Value = "20s"
				}
			}
			u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&d)
			if err != nil {
				t.Fatal(err)
			}
			r.Objects[i] = &unstructured.Unstructured{Object: u}
		}
	}
	return r.Objects
}

// startSidecarRealPods starts a cluster of nodes whose node1 runs a
// kubelet, imports both images, applies sidecarPodObjects with replicas
// pods and returns them once ready. ctx ends at the test's end.
func startSidecarRealPods(t *testing.T, nodes int, replicas int64) (*k8stest.Harness, context.Context, []corev1.Pod) {
	t.Helper()
	archives := []string{imageArchive(t), sidecarArchive(t)}
	h := k8stest.Start(t, k8stest.Options{Nodes: nodes, KubeletNode: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	t.Cleanup(cancel)
	for _, a := range archives {
		if err := h.Kubelet().Containerd.Import(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	createNamespace(ctx, t, h, realPodNS)
	a := kube.NewApplier(t, h)
	for _, obj := range sidecarPodObjects(t, h.Kubelet().Node.Name) {
		if obj.GetKind() == "Deployment" {
			if err := unstructured.SetNestedField(obj.Object, replicas, "spec", "replicas"); err != nil {
				t.Fatal(err)
			}
		}
		if err := a.Apply(ctx, obj, false); err != nil {
			t.Fatal(err)
		}
	}
	waitRollout(ctx, t, h, realPodNS, int32(replicas))
	pods, err := h.Client.CoreV1().Pods(realPodNS).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return h, ctx, pods.Items
}

// sidecarLogs follows the sidecar container's log of each pod named.
func followSidecarLog(ctx context.Context, h *k8stest.Harness, pod string) *harness.Log {
	l := &harness.Log{}
	go func() { // ends with the stream: the container's exit, or ctx
		req := h.Client.CoreV1().Pods(realPodNS).GetLogs(pod, &corev1.PodLogOptions{Container: "hapsuper", Follow: true})
		for try := 0; try < 50 && ctx.Err() == nil; try++ {
			if stream, err := req.Stream(ctx); err == nil {
				l.Read(stream)
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	return l
}

// The official image's pod shape with hapsuper as a native sidecar
// (overlays/sidecar), run by a real kubelet, containerd and runc: scaled
// from 2 pods to 1 while clients on two other nodes send through the
// ClusterIP. The kubelet runs the HAProxy container's preStop hook (an
// httpGet on the sidecar's gate) at the deletion; the gate holds it until
// routing is withdrawn and confirmed and the clients are quiet; only then
// the kubelet sends the image's STOPSIGNAL (SIGUSR1: HAProxy's soft stop).
// No request fails; the drain ends routed-away with its Event; HAProxy's
// container exits 0 after the gate opened, the sidecar exits 0 after it.
//
// Before that, a liveness probe kills one pod's HAProxy container: the
// kubelet runs the same preStop hook, which the gate answers at once (the
// pod is not being deleted), the container restarts, the sidecar keeps
// running (no restart) and starts no drain. The scale-down then removes
// that pod, given the lower controller.kubernetes.io/pod-deletion-cost: the
// drain is that of a sidecar that outlived an HAProxy restart. (Restarts
// alone do not decide it: the ReplicaSet ranks the time since each pod
// became ready, on a log scale, before them.)
func TestRealPod_Sidecar(t *testing.T) {
	began := time.Now()
	h, ctx, pods := startSidecarRealPods(t, 3, 2)
	t.Logf("2 pods ready %v after the cluster started", time.Since(began).Round(time.Millisecond))
	logs := map[string]*harness.Log{}
	for _, p := range pods {
		logs[p.Name] = followSidecarLog(ctx, h, p.Name)
	}

	// The status socket, through the CRI's exec into the sidecar's image
	// (hapsuper alone: no shell, no PATH of its own).
	// The pod is ready once HAProxy's container is; the sidecar serves once
	// it has read the master CLI, which may come a moment later: asked
	// until it says so, at most 30 s.
	var ph string
	var stderr string
	var err error
	for until := time.Now().Add(30 * time.Second); ; {
		var out string
		out, stderr, err = h.Exec(ctx, realPodNS, pods[1].Name, "hapsuper", "hapsuper", "status", "--json")
		if ph = statusPhase(out); (err == nil && ph == "serving") || time.Now().After(until) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if err != nil || ph != "serving" {
		t.Errorf("hapsuper status --json in the sidecar, for 30 s: phase %q, %v %s", ph, err, stderr)
	}
	checkLivenessKill(ctx, t, h, pods[0].Name, logs[pods[0].Name])
	waitRollout(ctx, t, h, realPodNS, 2)

	svc, err := h.Client.CoreV1().Services(realPodNS).Get(ctx, "haproxy", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + svc.Spec.ClusterIP + ":80/"
	tr := harness.NewTraffic(nil)
	for _, n := range h.Nodes()[1:] {
		waitSeen(t, n, url, 30*time.Second)
		tr.Every(n.Name, n.HTTPClient(5*time.Second), url, 20*time.Millisecond, false)
	}
	defer tr.Stop()
	time.Sleep(2 * time.Second)

	// The ReplicaSet deletes the pod of lower deletion cost first, before it
	// compares ready times and restarts.
	cost := `{"metadata":{"annotations":{"controller.kubernetes.io/pod-deletion-cost":"-100"}}}`
	if _, err := h.Client.CoreV1().Pods(realPodNS).Patch(ctx, pods[0].Name, types.MergePatchType, []byte(cost), metav1.PatchOptions{}); err != nil {
		t.Fatalf("pod %s: set its deletion cost: %v", pods[0].Name, err)
	}
	scaled := time.Now()
	if _, err := h.Client.AppsV1().Deployments(realPodNS).Patch(ctx, "haproxy", types.MergePatchType, []byte(`{"spec":{"replicas":1}}`), metav1.PatchOptions{}); err != nil {
		t.Fatalf("scale down: %v", err)
	}
	gone, last := waitPodGone(ctx, t, h, pods)
	t.Logf("pod %s removed %v after the scale-down", gone, time.Since(scaled).Round(time.Millisecond))
	if gone != pods[0].Name {
		t.Errorf("pod %s removed, want %s, whose HAProxy restarted and whose deletion cost is lower: the drain of a sidecar that outlived a restart", gone, pods[0].Name)
	}
	time.Sleep(time.Second)
	tr.Stop()
	outcomes := tr.Outcomes()
	var failed []string
	for _, o := range outcomes {
		if o.Kind != harness.KindOK {
			failed = append(failed, o.String())
		}
	}
	t.Logf("requests: %d sent, %d failed", len(outcomes), len(failed))
	if len(outcomes) < 100 || len(failed) > 0 {
		t.Errorf("%d of %d requests failed:\n%s", len(failed), len(outcomes), strings.Join(failed, "\n"))
	}

	l := logs[gone]
	l.WaitRead(10 * time.Second)
	d := l.ReadDrain(time.Time{})
	held, heldOK := l.Find("gate asked: held until the drain ends", nil)
	// HAProxy gone: seen over the master CLI, or the kubelet's SIGTERM to
	// the sidecar, which comes once the other containers exited.
	hgone, goneOK := l.Find("haproxy gone", nil)
	if !goneOK {
		hgone, goneOK = l.Find("stop signal: exiting", nil)
	}
	// From the scale-down, on the test's clock (deletionTimestamp has a
	// second's precision); the ReplicaSet deletes the pod a few ms later.
	deleted := scaled
	t.Logf("pod %s, from the scale-down: drain started +%v, withdrawn +%v, gate asked +%v, drain ended +%v (%s: %s), HAProxy gone (or the sidecar stopped) +%v",
		gone, d.Started.Sub(deleted).Round(time.Millisecond), d.Withdrawn.Sub(deleted).Round(time.Millisecond),
		held.At.Sub(deleted).Round(time.Millisecond), d.Ended.Sub(deleted).Round(time.Millisecond), d.Reason, d.Detail,
		hgone.At.Sub(deleted).Round(time.Millisecond))
	switch {
	case d.Ended.IsZero():
		t.Fatalf("pod %s: no drain ended in the sidecar's log:\n%s", gone, l.Tail(30))
	case d.Reason != "routed-away":
		t.Errorf("pod %s: drain ended %s (%s), want routed-away", gone, d.Reason, d.Detail)
	}
	// The hook held until the drain ended, or, where the kubelet acted
	// on the deletion later than the drain took (a loaded machine), it
	// came after and was answered at once.
	late, lateOK := l.Find("gate asked after the drain ended: answered at once", nil)
	switch {
	case heldOK:
	case lateOK:
		t.Logf("pod %s: the kubelet's hook came +%v, after the drain ended: answered at once", gone, late.At.Sub(deleted).Round(time.Millisecond))
	default:
		t.Errorf("pod %s: the kubelet's hook never reached the gate while the pod was being deleted; log:\n%s", gone, l.Tail(30))
	}
	if !goneOK || hgone.At.Before(d.Ended) {
		t.Errorf("pod %s: haproxy gone or the sidecar's stop at %v (logged %v), want after the drain ended at %v; log:\n%s", gone, hgone.At, goneOK, d.Ended, l.Tail(30))
	}
	for _, cs := range append(last.Status.InitContainerStatuses, last.Status.ContainerStatuses...) {
		term := cs.State.Terminated
		if term == nil {
			t.Errorf("pod %s: container %s never reported terminated", gone, cs.Name)
			continue
		}
		t.Logf("pod %s: container %s exited %d at +%v (a second's precision)", gone, cs.Name, term.ExitCode, term.FinishedAt.Sub(deleted).Round(time.Second))
		if term.ExitCode != 0 {
			t.Errorf("pod %s: container %s exited %d (%s), want 0", gone, cs.Name, term.ExitCode, term.Reason)
		}
		if cs.Name == "haproxy" && term.FinishedAt.Time.Before(d.Ended.Truncate(time.Second)) {
			t.Errorf("pod %s: HAProxy's container finished at %v, before the gate opened at %v", gone, term.FinishedAt, d.Ended)
		}
	}
	evs, err := h.Client.EventsV1().Events(realPodNS).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var reasons []string
	drained := false
	for _, ev := range evs.Items {
		if ev.Regarding.Name != gone {
			continue
		}
		reasons = append(reasons, ev.Reason)
		if ev.Reason == "DrainEnded" {
			drained = true
			t.Logf("Event DrainEnded on %s: %s", gone, ev.Note)
		}
		if ev.Reason == "FailedPreStopHook" {
			t.Errorf("Event FailedPreStopHook on %s: %s", gone, ev.Note)
		}
	}
	if !drained {
		t.Errorf("no Event DrainEnded on %s; its Events: %v", gone, reasons)
	}
	t.Logf("scenario wall time %v", time.Since(began).Round(time.Millisecond))
}

// waitPodGone polls the pods until one of them is removed, and returns its
// name and the last state seen of it (containers terminated).
func waitPodGone(ctx context.Context, t *testing.T, h *k8stest.Harness, pods []corev1.Pod) (string, *corev1.Pod) {
	t.Helper()
	last := map[string]*corev1.Pod{}
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		for _, p := range pods {
			got, err := h.Client.CoreV1().Pods(realPodNS).Get(ctx, p.Name, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
				if last[p.Name] == nil || last[p.Name].DeletionTimestamp == nil {
					t.Fatalf("pod %s removed before it was seen being deleted", p.Name)
				}
				return p.Name, last[p.Name]
			case errors.Is(err, context.DeadlineExceeded):
				t.Fatal(err)
			case err == nil:
				last[p.Name] = got
			}
		}
	}
	t.Fatal("no pod removed within 2 minutes of the scale-down")
	return "", nil
}

// checkLivenessKill fails pod's liveness probe once and checks that the
// gate answered the kubelet's hook at once, HAProxy's container restarted,
// the sidecar did not, saw HAProxy come back and started no drain.
func checkLivenessKill(ctx context.Context, t *testing.T, h *k8stest.Harness, pod string, l *harness.Log) {
	t.Helper()
	failed := time.Now()
	if _, stderr, err := h.Exec(ctx, realPodNS, pod, "haproxy", "touch", realUnhealthy); err != nil {
		t.Fatalf("touch %s in pod %s: %v %s", realUnhealthy, pod, err, stderr)
	}
	asked, ok := l.Wait("gate asked while the pod is not being deleted: answered at once (a liveness or startup probe's restart, or a stray request)", nil, 30*time.Second, nil)
	if !ok {
		t.Fatalf("pod %s: the liveness kill's hook never reached the gate; sidecar log:\n%s", pod, l.Tail(20))
	}
	var got *corev1.Pod
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
		var err error
		if got, err = h.Client.CoreV1().Pods(realPodNS).Get(ctx, pod, metav1.GetOptions{}); err != nil {
			t.Fatal(err)
		}
		if restarted(got, "haproxy") && podReady(got) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pod %s: HAProxy's container not restarted and ready a minute after the liveness kill: %+v", pod, got.Status.ContainerStatuses)
		}
	}
	back := time.Now()
	if _, ok := l.Find("drain started", nil); ok {
		t.Errorf("pod %s: the liveness kill started a drain", pod)
	}
	for _, cs := range append(got.Status.InitContainerStatuses, got.Status.ContainerStatuses...) {
		t.Logf("pod %s: container %s restarted %d times; last end %+v", pod, cs.Name, cs.RestartCount, cs.LastTerminationState.Terminated)
		switch {
		case cs.Name == "haproxy" && cs.RestartCount != 1:
			t.Errorf("pod %s: HAProxy's container restarted %d times, want 1 (the liveness kill)", pod, cs.RestartCount)
		case cs.Name == "hapsuper" && cs.RestartCount != 0:
			t.Errorf("pod %s: the sidecar restarted %d times, want 0", pod, cs.RestartCount)
		}
	}
	t.Logf("pod %s: liveness kill: hook answered +%v after the probe was failed, HAProxy's container ready again +%v",
		pod, asked.At.Sub(failed).Round(time.Millisecond), back.Sub(failed).Round(time.Millisecond))
}

// restarted says the pod's container name restarted at least once.
func restarted(p *corev1.Pod, name string) bool {
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == name && cs.RestartCount > 0 && cs.State.Running != nil {
			return true
		}
	}
	return false
}

// podReady says the pod's Ready condition is true.
func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
