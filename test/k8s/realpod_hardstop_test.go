package k8s_test

import (
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// A pod whose HAProxy ignores the hard stop (its master stopped with
// SIGSTOP: no poll is answered and no signal but SIGKILL acts) is deleted
// with a grace period of 15 s, shorter than the 30 s its spec and
// HAPSUPER_GRACE_PERIOD say. hapsuper reads the shorter grace period from
// the pod, hard-stops at 15 s − margin (5 s here), kills HAProxy's process
// group when the hard stop is ignored, and exits on its own: the container
// ends well before the kubelet's SIGKILL at 15 s, hapsuper logs its own
// end, and nothing is left in the container's cgroup.
func TestRealPod_HardStopIgnored(t *testing.T) {
	const (
		grace  = 15 // seconds, the delete's grace period
		margin = 5 * time.Second
	)
	h, ctx, pods := startRealPods(t, 1, 5*time.Minute, 1, func(d *unstructured.Unstructured) {
		setReplicasAndEnv(t, d, 1, corev1.EnvVar{Name: "HAPSUPER_MARGIN", Value: margin.String()})
	})
	p := waitInspected(t, pods)
	p.mu.Lock()
	master, cgroupDir := p.processes.master, p.processes.cgroupDir
	p.mu.Unlock()
	if master == 0 {
		t.Fatalf("pod %s: no HAProxy process is a child of the container's first process", p.name)
	}
	if _, ok := p.log.Wait("haproxy ready", nil, 10*time.Second, nil); !ok {
		t.Logf("no \"haproxy ready\" line yet; the log ends:\n%s", p.log.Tail(10))
	}
	if err := syscall.Kill(master, syscall.SIGSTOP); err != nil {
		t.Fatalf("SIGSTOP HAProxy's master %d: %v", master, err)
	}
	t.Logf("pod %s: HAProxy's master %d stopped", p.name, master)
	gp := int64(grace)
	deleted := time.Now()
	if err := h.Client.CoreV1().Pods(realPodNS).Delete(ctx, p.name, metav1.DeleteOptions{GracePeriodSeconds: &gp}); err != nil {
		t.Fatalf("delete pod %s: %v", p.name, err)
	}

	var term *corev1.ContainerStateTerminated
	for end := time.Now().Add(time.Duration(grace+20) * time.Second); term == nil && time.Now().Before(end); {
		time.Sleep(200 * time.Millisecond)
		p.mu.Lock()
		term = p.terminated
		p.mu.Unlock()
	}
	if term == nil {
		t.Fatalf("pod %s: the kubelet never reported its container terminated (%v after the delete); its log ends:\n%s",
			p.name, time.Since(deleted).Round(time.Second), p.log.Tail(20))
	}
	p.log.WaitRead(10 * time.Second)
	started, okStarted := p.log.Find("drain started", nil)
	hard, okHard := p.log.Find("hard stop", nil)
	kill, okKill := p.log.Find("haproxy did not exit after the hard stop: killing its process group", nil)
	exited, okExited := p.log.Find("haproxy exited", nil)
	if !okStarted {
		t.Fatalf("pod %s: no drain started in its log; it ends:\n%s", p.name, p.log.Tail(20))
	}
	took := term.FinishedAt.Sub(started.At) // FinishedAt has whole seconds
	t.Logf("pod %s: drain started on %s; hard stop %v, group killed %v, haproxy exited %v (code %v) after it; container exit code %d %v after it (grace %ds, margin %v)",
		p.name, started.Str("signal"), hard.At.Sub(started.At).Round(time.Millisecond), kill.At.Sub(started.At).Round(time.Millisecond),
		exited.At.Sub(started.At).Round(time.Millisecond), exited.Fields["code"], term.ExitCode, took.Round(time.Second), grace, margin)
	// The pod watch may see the delete's grace period before the kubelet's
	// signal arrives, or after: either line says hapsuper took it.
	_, movedBefore := p.log.Find("the pod's grace period is shorter: the deadline will count from it", nil)
	_, movedAfter := p.log.Find("deadline moved to the pod's grace period", nil)
	if !movedBefore && !movedAfter {
		t.Errorf("pod %s: hapsuper never took the delete's grace period of %ds; its log ends:\n%s", p.name, grace, p.log.Tail(20))
	}
	if !okHard {
		t.Errorf(`pod %s: no "hard stop" in its log`, p.name)
	} else if d := hard.At.Sub(started.At); d > grace*time.Second-margin+time.Second {
		t.Errorf("pod %s: hard stop %v after the stop signal, want by %v (the delete's grace period − margin): the pod's grace period was not followed", p.name, d, grace*time.Second-margin)
	}
	if !okKill {
		t.Errorf("pod %s: hapsuper never killed HAProxy's process group after the ignored hard stop; its log ends:\n%s", p.name, p.log.Tail(20))
	}
	if !okExited {
		t.Errorf("pod %s: hapsuper never logged HAProxy's exit (killed by the kubelet before it could?)", p.name)
	}
	if took >= (grace-2)*time.Second {
		t.Errorf("pod %s: container ended %v after the stop signal, want well before the kubelet's SIGKILL at %ds", p.name, took, grace)
	}
	if int(term.ExitCode) != 128+int(syscall.SIGKILL) {
		t.Errorf("pod %s: container exit code %d, want %d (hapsuper passes on its killed master's 128+9)", p.name, term.ExitCode, 128+int(syscall.SIGKILL))
	}
	if left, err := cgroupProcs(cgroupDir); err != nil || left != "" {
		t.Errorf("pod %s: processes left in its cgroup %s after exit: %q (%v)", p.name, cgroupDir, left, err)
	}
}

// setReplicasAndEnv sets a rendered Deployment's replicas and adds env to
// its first container.
func setReplicasAndEnv(t *testing.T, obj *unstructured.Unstructured, replicas int64, env corev1.EnvVar) {
	t.Helper()
	if err := unstructured.SetNestedField(obj.Object, replicas, "spec", "replicas"); err != nil {
		t.Fatal(err)
	}
	containers, _, err := unstructured.NestedSlice(obj.Object, "spec", "template", "spec", "containers")
	if err != nil || len(containers) == 0 {
		t.Fatalf("the Deployment has no containers: %v", err)
	}
	c := containers[0].(map[string]any)
	list, _ := c["env"].([]any)
	c["env"] = append(list, map[string]any{"name": env.Name, "value": env.Value})
	if err := unstructured.SetNestedSlice(obj.Object, containers, "spec", "template", "spec", "containers"); err != nil {
		t.Fatal(err)
	}
}

// waitInspected waits for the first pod whose processes were read.
func waitInspected(t *testing.T, w *podWatch) *realPod {
	t.Helper()
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		for _, p := range w.all() {
			p.mu.Lock()
			ready := len(p.processes.haproxy) >= 2 && p.processes.cgroupDir != ""
			p.mu.Unlock()
			if ready {
				return p
			}
		}
	}
	t.Fatal("no pod's HAProxy processes were seen within 30s")
	return nil
}
