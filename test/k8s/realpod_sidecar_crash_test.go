package k8s_test

import (
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A crashed sidecar never holds a pod's stop past its grace period: the
// sidecar's process is killed twice (the kubelet restarts it at once, then
// backs off 10 s) and the pod is deleted while it is down. The kubelet's
// hook finds no gate: it records FailedPreStopHook and sends the stop
// signal at once, HAProxy soft-stops and exits 0, and the pod is gone long
// before its 20 s grace period. No DrainEnded Event: the sidecar's absence
// shows as the failed hook.
func TestRealPod_SidecarCrashed(t *testing.T) {
	h, ctx, pods := startSidecarRealPods(t, 1, 1)
	pod := pods[0].Name
	for kill := 1; kill <= 2; kill++ {
		got, err := h.Client.CoreV1().Pods(realPodNS).Get(ctx, pod, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		id := ""
		for _, cs := range got.Status.InitContainerStatuses {
			if cs.Name == "hapsuper" && cs.State.Running != nil {
				id = strings.TrimPrefix(cs.ContainerID, "containerd://")
			}
		}
		if id == "" {
			t.Fatalf("pod %s: the sidecar is not running before kill %d: %+v", pod, kill, got.Status.InitContainerStatuses)
		}
		pid, err := h.Kubelet().Containerd.TaskPID(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatalf("kill the sidecar (pid %d): %v", pid, err)
		}
		if kill == 2 {
			break
		}
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			got, err = h.Client.CoreV1().Pods(realPodNS).Get(ctx, pod, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if len(got.Status.InitContainerStatuses) == 1 && got.Status.InitContainerStatuses[0].RestartCount == 1 && got.Status.InitContainerStatuses[0].State.Running != nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("pod %s: the sidecar not restarted 30 s after it was killed: %+v", pod, got.Status.InitContainerStatuses)
			}
		}
	}
	time.Sleep(500 * time.Millisecond) // the kubelet has seen the second crash
	var grace int64 = 20
	if err := h.Client.CoreV1().Pods(realPodNS).Delete(ctx, pod, metav1.DeleteOptions{GracePeriodSeconds: &grace}); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	gone, last := waitPodGone(ctx, t, h, pods)
	took := time.Since(deleted)
	t.Logf("pod %s removed %v after its deletion (grace %ds)", gone, took.Round(time.Millisecond), grace)
	if took >= time.Duration(grace)*time.Second/2 {
		t.Errorf("pod %s took %v to stop with its sidecar down: the stop waited on the gate", gone, took)
	}
	for _, cs := range last.Status.ContainerStatuses {
		if cs.Name == "haproxy" && (cs.State.Terminated == nil || cs.State.Terminated.ExitCode != 0) {
			t.Errorf("pod %s: HAProxy's container ended %+v, want exit 0 (the soft stop)", gone, cs.State.Terminated)
		}
	}
	var failedHook, drained bool
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline) && !failedHook; time.Sleep(200 * time.Millisecond) {
		evs, err := h.Client.EventsV1().Events(realPodNS).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs.Items {
			if ev.Regarding.Name != gone {
				continue
			}
			switch ev.Reason {
			case "FailedPreStopHook":
				failedHook = true
				t.Logf("Event FailedPreStopHook on %s: %s", gone, ev.Note)
			case "DrainEnded":
				drained = true
			}
		}
	}
	if !failedHook {
		t.Errorf("pod %s: no FailedPreStopHook Event: the sidecar's absence does not show", gone)
	}
	if drained {
		t.Errorf("pod %s: a DrainEnded Event with the sidecar down", gone)
	}
}
