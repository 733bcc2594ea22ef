package k8s_test

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The only pod of its Service deleted with a grace period of 6 s instead
// of the pod spec's 20 s, under the real kubelet, its replacement unable to
// start (the ConfigMap now holds no HAProxy configuration): kube-proxy
// keeps routing to it (no other endpoint), so the gate holds to the bound, which the
// sidecar scales to the deletion's grace period (--max-wait 12 s of 18 s →
// 2.7 s of 4 s). The kubelet then gives the stop signal what is left
// (6 − ⌊hook seconds⌋ = 4 s): HAProxy's soft stop ends in time, its
// container exits 0 (not 137, a SIGKILL), and the pod is gone before the
// grace period ends.
func TestRealPod_SidecarShortGrace(t *testing.T) {
	h, ctx, pods := startSidecarRealPods(t, 1, 1)
	pod := pods[0].Name
	l := followSidecarLog(ctx, h, pod)
	if _, ok := l.Wait("haproxy found", nil, 30*time.Second, nil); !ok {
		t.Fatalf("pod %s: the sidecar never found HAProxy; log:\n%s", pod, l.Tail(20))
	}
	cms, err := h.Client.CoreV1().ConfigMaps(realPodNS).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, cm := range cms.Items {
		if _, ok := cm.Data["haproxy.cfg"]; ok {
			cm.Data["haproxy.cfg"] = "not an HAProxy configuration: the replacement pod never serves\n"
			if _, err := h.Client.CoreV1().ConfigMaps(realPodNS).Update(ctx, &cm, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	var grace int64 = 6
	if err := h.Client.CoreV1().Pods(realPodNS).Delete(ctx, pod, metav1.DeleteOptions{GracePeriodSeconds: &grace}); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	gone, last := waitPodGone(ctx, t, h, pods)
	took := time.Since(deleted)
	l.WaitRead(10 * time.Second)
	d := l.ReadDrain(time.Time{})
	t.Logf("pod %s: drain started +%v, ended +%v (%s), pod gone +%v (grace %ds)", gone,
		d.Started.Sub(deleted).Round(time.Millisecond), d.Ended.Sub(deleted).Round(time.Millisecond), d.Reason, took.Round(time.Millisecond), grace)
	if d.Reason != "bound" {
		t.Errorf("drain ended %q (%s), want bound: nothing else serves", d.Reason, d.Detail)
	}
	// The bound scaled to the deletion's grace period: 12 s × (6 − 2) / (20 − 2).
	bound := 12 * time.Second * 4 / 18
	if held := d.Ended.Sub(d.Started); held < bound-100*time.Millisecond || held > bound+time.Second {
		t.Errorf("the gate held %v, want the scaled bound %v", held, bound)
	}
	if took >= time.Duration(grace)*time.Second+2*time.Second {
		t.Errorf("pod gone %v after a deletion with grace %ds", took, grace)
	}
	for _, cs := range append(last.Status.InitContainerStatuses, last.Status.ContainerStatuses...) {
		term := cs.State.Terminated
		if term == nil {
			t.Errorf("container %s never reported terminated", cs.Name)
			continue
		}
		t.Logf("container %s exited %d (%s)", cs.Name, term.ExitCode, term.Reason)
		if term.ExitCode != 0 {
			t.Errorf("container %s exited %d, want 0 (137: the kubelet's SIGKILL at the grace period's end)", cs.Name, term.ExitCode)
		}
	}
}
