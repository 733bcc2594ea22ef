package k8stest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"golang.org/x/sys/unix"
)

// Kubelet is a real kubelet on one node, with containerd and runc: pods
// bound to that node (spec.nodeName: no scheduler runs) are started,
// probed, stopped with their image's STOPSIGNAL and killed at their grace
// period as on a real cluster. Everything it writes is under the harness's
// temporary directory (its root, pod logs, containerd's root and state with
// the sandboxes' network namespaces, CNI configuration and IPAM state) or
// in the node's network namespace, but for the containers' cgroups (runc
// removes them) and kubeletHostPaths.
//
// The kubelet authenticates to the apiserver with the admin certificate
// (system:masters: the apiserver runs RBAC only, without the Node
// authorizer), and accepts the apiserver's client certificate for exec and
// logs (authorization AlwaysAllow).
type Kubelet struct {
	// Node is the node the kubelet runs on.
	Node *Node
	// Containerd is the node's container runtime.
	Containerd *Containerd

	dir     string
	proc    *Process
	lock    *os.File
	created []string // kubeletHostPaths this kubelet made: removed at stop
}

// kubeletLock is held while a kubelet runs: cAdvisor, cgroups and the
// container runtime's pieces are the machine's, one kubelet at a time.
const kubeletLock = slotLockDir + "/kubelet"

// kubeletConfig is the KubeletConfiguration: cgroupfs on cgroup v1 (no
// systemd; failCgroupV1 false), no swap check, no QoS cgroups (the
// machine's cgroup tree is not the kubelet's to shape), no DNS server, no
// eviction or image GC worth the name in a test.
const kubeletConfig = `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
containerRuntimeEndpoint: unix://{{containerd}}
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
cgroupsPerQOS: false
enforceNodeAllocatable: []
address: {{ip}}
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: false
  x509:
    clientCAFile: {{ca}}
authorization:
  mode: AlwaysAllow
podLogsDir: {{dir}}/pod-logs
resolvConf: {{dir}}/resolv.conf
serializeImagePulls: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: 1Mi
  nodefs.available: 1%
  imagefs.available: 1%
  nodefs.inodesFree: 1%
nodeStatusUpdateFrequency: 2s
syncFrequency: 10s
`

// startKubelet starts containerd and a kubelet on node n, imports the
// pause image and waits until the kubelet reports the node ready.
func (h *Harness) startKubelet(ctx context.Context, n *Node) (*Kubelet, error) {
	k := &Kubelet{Node: n, dir: h.path("kubelet")}
	lock, err := lockKubelet(ctx)
	if err != nil {
		return nil, err
	}
	k.lock = lock
	h.kubelet = k // from here on, teardown stops it
	if err := k.claimHostPaths(); err != nil {
		return nil, err
	}
	for _, d := range []string{k.dir, filepath.Join(k.dir, "root"), filepath.Join(k.dir, "pod-logs")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("create %s: %w", d, err)
		}
	}
	if k.Containerd, err = startContainerd(ctx, n, h.path("containerd")); err != nil {
		return nil, err
	}
	pause, err := pauseImage(ctx, k.dir)
	if err != nil {
		return nil, err
	}
	if err := k.Containerd.Import(ctx, pause); err != nil {
		return nil, err
	}
	config := strings.NewReplacer(
		"{{containerd}}", k.Containerd.Socket, "{{ip}}", n.IP.String(),
		"{{ca}}", h.pki.CA, "{{dir}}", k.dir,
	).Replace(kubeletConfig)
	files := map[string]string{
		filepath.Join(k.dir, "config.yaml"): config,
		filepath.Join(k.dir, "resolv.conf"): "",
	}
	for path, data := range files {
		if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
			return nil, fmt.Errorf("write %s: %w", path, err)
		}
	}
	began := time.Now()
	k.proc, err = startProcess("kubelet", filepath.Join(k.dir, "kubelet.log"), []string{
		"nsenter", "--net=" + filepath.Join(netnsDir, n.NetNS),
		filepath.Join(h.bin, "kubelet"),
		"--config=" + filepath.Join(k.dir, "config.yaml"),
		"--kubeconfig=" + h.path("admin.kubeconfig"),
		"--root-dir=" + filepath.Join(k.dir, "root"),
		"--cert-dir=" + filepath.Join(k.dir, "pki"),
		"--hostname-override=" + n.Name,
		"--node-ip=" + n.IP.String(),
		"--v=1",
	})
	if err != nil {
		return nil, err
	}
	if err := k.waitReady(ctx, h, began); err != nil {
		return nil, err
	}
	return k, nil
}

// lockKubelet takes the machine's kubelet lock, waiting (bounded by ctx)
// for another test process's kubelet to finish.
func lockKubelet(ctx context.Context) (*os.File, error) {
	if err := os.MkdirAll(slotLockDir, 0o755); err != nil {
		return nil, fmt.Errorf("create %s: %w", slotLockDir, err)
	}
	f, err := os.OpenFile(kubeletLock, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open kubelet lock: %w", err)
	}
	err = poll(ctx, 500*time.Millisecond, func() (bool, error) {
		return unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) == nil, nil
	})
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("take %s (another test process runs a kubelet): %w", kubeletLock, err)
	}
	return f, nil
}

// waitReady waits for the kubelet's own report that the node is ready: a
// Ready condition heartbeat after it started, with its version filled in.
func (k *Kubelet) waitReady(ctx context.Context, h *Harness, began time.Time) error {
	var last string
	err := poll(ctx, 200*time.Millisecond, func() (bool, error) {
		if err := k.proc.Err(); err != nil {
			return false, fmt.Errorf("kubelet exited: %v; its log ends:\n%s", err, k.proc.LogTail(30))
		}
		node, err := h.Client.CoreV1().Nodes().Get(ctx, k.Node.Name, metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		if !strings.HasPrefix(node.Status.NodeInfo.ContainerRuntimeVersion, "containerd://") {
			last = "no runtime version reported yet"
			return false, nil
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady {
				last = fmt.Sprintf("Ready=%s %s: %s", c.Status, c.Reason, c.Message)
				return c.Status == corev1.ConditionTrue && c.LastHeartbeatTime.After(began), nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("wait for kubelet on %s to report ready (last: %s): %w; its log ends:\n%s", k.Node.Name, last, err, k.proc.LogTail(30))
	}
	h.t.Logf("k8stest: kubelet on %s ready in %v (%s)", k.Node.Name, time.Since(began).Round(time.Millisecond), k.dir)
	return nil
}

// LogTail returns the last n lines of the kubelet's log.
func (k *Kubelet) LogTail(n int) string { return k.proc.LogTail(n) }

// stopPods has the kubelet stop every pod bound to its node, as a
// cluster's drain of a node would (grace period 1s), and waits (bounded)
// until it has removed them: their sandboxes are torn down through the CNI
// plugins then, not killed. The caller has stopped the controllers that
// would replace them. Without an apiserver, there is nothing to do.
func (k *Kubelet) stopPods(h *Harness) error {
	if k.proc == nil || k.proc.Err() != nil || h.APIServerProcess() == nil || h.APIServerProcess().Err() != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	selector := metav1.ListOptions{FieldSelector: "spec.nodeName=" + k.Node.Name}
	pods, err := h.Client.CoreV1().Pods("").List(ctx, selector)
	if err != nil {
		return fmt.Errorf("list the pods of %s: %w", k.Node.Name, err)
	}
	for _, p := range pods.Items {
		err := h.Client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](1)})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete pod %s/%s: %w", p.Namespace, p.Name, err)
		}
	}
	left := len(pods.Items)
	err = poll(ctx, 200*time.Millisecond, func() (bool, error) {
		pods, err := h.Client.CoreV1().Pods("").List(ctx, selector)
		if err != nil {
			return false, nil
		}
		left = len(pods.Items)
		return left == 0, nil
	})
	if err != nil {
		return fmt.Errorf("wait for the kubelet on %s to stop its pods: %d left: %w", k.Node.Name, left, err)
	}
	return nil
}

// stop kills the kubelet, then containerd with every container it still
// runs, unmounts what the kubelet left mounted under its directory, and
// releases the lock. It returns what went wrong.
func (k *Kubelet) stop(failed bool, logf func(string, ...any)) []error {
	var errs []error
	if k.proc != nil {
		if err := k.proc.Crashed(); err != nil {
			errs = append(errs, fmt.Errorf("kubelet exited during the test: %v; its log ends:\n%s", err, k.proc.LogTail(30)))
		} else if failed {
			logf("k8stest: kubelet log ends:\n%s", k.proc.LogTail(30))
		}
		if err := k.proc.Kill(); err != nil {
			errs = append(errs, err)
		}
	}
	if k.Containerd != nil && failed && k.Containerd.proc != nil {
		logf("k8stest: containerd log ends:\n%s", k.Containerd.proc.LogTail(20))
	}
	errs = append(errs, k.Containerd.stop()...)
	errs = append(errs, unmountUnder(k.dir)...)
	if k.Containerd != nil {
		errs = append(errs, unmountUnder(k.Containerd.dir)...)
	}
	errs = append(errs, k.removeHostPaths()...)
	if k.lock != nil {
		k.lock.Close()
	}
	return errs
}
