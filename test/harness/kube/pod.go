package kube

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/hapsuper/hapsuper/test/harness"
	"github.com/hapsuper/hapsuper/test/k8s/k8stest"
)

// Container is a process run in a pod's network namespace as the kubelet
// runs a container: with the downward-API environment hapsuper reads, and
// killed with the test process. `ip netns exec` execs in place, so the
// process is the program itself.
type Container struct {
	*k8stest.Pod
	*harness.Process
}

// StartContainer starts argv in pod's network namespace; the test's
// cleanup kills it if it still runs.
func StartContainer(t harness.TB, pod *k8stest.Pod, argv ...string) *Container {
	t.Helper()
	cmd := pod.Command(context.Background(), argv[0], argv[1:]...)
	cmd.Env = []string{
		"PATH=/usr/sbin:/usr/bin:/sbin:/bin",
		"POD_NAME=" + pod.Name, "POD_NAMESPACE=" + pod.Namespace,
		"POD_IPS=" + pod.IP.String(), "NODE_NAME=" + pod.Node.Name,
	}
	if v := os.Getenv("HAPSUPER_LOG_LEVEL"); v != "" { // a run's own (debug) level
		cmd.Env = append(cmd.Env, "HAPSUPER_LOG_LEVEL="+v)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	p, err := harness.Start(cmd)
	if err != nil {
		t.Fatalf("pod %s: %v", pod.Name, err)
	}
	c := &Container{Pod: pod, Process: p}
	t.Cleanup(func() {
		if !c.Kill() {
			t.Errorf("pod %s: %s not reaped 5s after SIGKILL", pod.Name, argv[0])
		}
	})
	return c
}

// Hapsuper is how a pod runs hapsuper: the routing mode, the drain's
// timings, extra flags, and HAProxy's configuration file.
type Hapsuper struct {
	Routing     string        // --routing
	Grace       time.Duration // --grace-period
	QuietPeriod time.Duration // --quiet-period
	Flags       []string      // more flags
	Config      string        // HAProxy's -f
}

// StartHapsuper starts hapsuper over /usr/sbin/haproxy in pod, with the
// env's kubeconfig, JSON logs and its sockets in dir, and waits for
// "haproxy ready" (15 s at most) and, with routing, "routing watch synced"
// (45 s). The pod is not Ready yet.
func (e *Env) StartHapsuper(t harness.TB, pod *k8stest.Pod, dir string, o Hapsuper) *Container {
	t.Helper()
	argv := []string{e.Bin,
		"--routing", o.Routing, "--kubeconfig", e.Kubeconfig,
		"--grace-period", o.Grace.String(), "--quiet-period", o.QuietPeriod.String(),
		"--log-format", "json",
		"--master-socket", filepath.Join(dir, "master.sock"),
		"--status-socket", filepath.Join(dir, "status.sock"),
		"--override-file", filepath.Join(dir, "override.cfg")}
	argv = append(append(argv, o.Flags...), "--", "/usr/sbin/haproxy", "-f", o.Config)
	c := StartContainer(t, pod, argv...)
	msgs := []string{"haproxy ready"}
	if o.Routing != "off" {
		msgs = append(msgs, "routing watch synced")
	}
	for _, msg := range msgs {
		// The watch syncs late after an apiserver restart: client-go's
		// reflector retries with a backoff doubling from 0.8 s to 30 s.
		wait := 15 * time.Second
		if msg == "routing watch synced" {
			wait = 45 * time.Second
		}
		if _, ok := c.Wait(msg, nil, wait, c.Done()); !ok {
			t.Fatalf("pod %s: no %q in hapsuper's log within %v (exited: %v); log:\n%s", pod.Name, msg, wait, c.Exited(), c.Tail(30))
		}
	}
	return c
}

// PodDir makes the directory of pod name's files under the env's.
func (e *Env) PodDir(t harness.TB, name string) string {
	t.Helper()
	dir := filepath.Join(e.Dir, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("create directory of pod %s: %v", name, err)
	}
	return dir
}
