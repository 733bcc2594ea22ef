package k8stest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// containerdNamespace is the containerd namespace the CRI plugin (and so the
// kubelet) uses.
const containerdNamespace = "k8s.io"

// Containerd is Debian's containerd with runc, run for one kubelet node:
// every directory (root, state, sockets, CNI configuration and IPAM state)
// is under the harness's temporary directory, and the process runs in the
// node's network namespace.
type Containerd struct {
	// Socket is the CRI and containerd API socket.
	Socket string

	dir  string
	proc *Process
	// cgroups are the parent cgroups runc creates for the CRI's containers
	// (<controller>/k8s.io) that did not exist before: removed at stop.
	cgroups []string
}

// containerdConfig is containerd 1.6's configuration (version 2). cgroupfs
// (no systemd here); restrict_oom_score_adj because without
// CAP_SYS_RESOURCE runc's write of a lower oom_score_adj fails ("can't get
// final child's PID from pipe"); the pause image built by pauseImage; the
// pod sandboxes' network namespaces under the state directory, not in
// /var/run/netns (so a crashed run's are found and unmounted with it).
const containerdConfig = `version = 2
root = "{{dir}}/root"
state = "{{dir}}/state"
[grpc]
  address = "{{dir}}/containerd.sock"
[ttrpc]
  address = "{{dir}}/containerd.sock.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "{{dir}}/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "` + pauseImageRef + `"
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "{{dir}}/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "{{dir}}/net.d"
`

// cniConfig is the pod network of a kubelet node: a bridge in the node's
// namespace that is the pods' gateway, addresses from the node's pod range
// (host-local, its state in the harness's directory). No masquerade: the
// node's own rule covers traffic leaving the cluster range. The tuning
// plugin gives every pod what the harness's own pods have (pod.go): no
// TIME_WAIT or FIN_WAIT2 sockets. HAProxy closes first when a client asks
// for Connection: close, so a real pod holds one per request for 60 s, and
// a node's conntrack can forget the masqueraded tuple while the pod still
// holds it (srcport.go): the pod's old socket then answers a new SYN with a
// RST, a refused request from a live, listening pod (most likely the 1 of
// 1,412 requests refused in one full run's TestRealPod_Rollout, at
// 14:58:28.847, after every stopped pod's sandbox was gone).
const cniConfig = `{
  "cniVersion": "0.4.0",
  "name": "hapsuper-test",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "cni0",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "{{dir}}/ipam",
        "ranges": [[{"subnet": "{{subnet}}"}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    },
    {
      "type": "tuning",
      "sysctl": {"net.ipv4.tcp_max_tw_buckets": "0"}
    }
  ]
}
`

// startContainerd writes containerd's and the CNI configuration under dir
// and starts containerd in the node's network namespace; it returns when
// the CRI answers.
func startContainerd(ctx context.Context, n *Node, dir string) (*Containerd, error) {
	c := &Containerd{Socket: filepath.Join(dir, "containerd.sock"), dir: dir}
	for _, d := range []string{dir, filepath.Join(dir, "net.d"), filepath.Join(dir, "ipam")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("create %s: %w", d, err)
		}
	}
	config := strings.ReplaceAll(containerdConfig, "{{dir}}", dir)
	cni := strings.NewReplacer("{{dir}}", dir, "{{subnet}}", n.PodCIDR.String()).Replace(cniConfig)
	files := map[string]string{
		filepath.Join(dir, "config.toml"):                 config,
		filepath.Join(dir, "net.d", "10-bridge.conflist"): cni,
	}
	for path, data := range files {
		if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
			return nil, fmt.Errorf("write %s: %w", path, err)
		}
	}
	c.cgroups = missingCgroupParents()
	var err error
	c.proc, err = startProcess("containerd", filepath.Join(dir, "containerd.log"), []string{
		"nsenter", "--net=" + filepath.Join(netnsDir, n.NetNS),
		"containerd", "--config", filepath.Join(dir, "config.toml"), "--log-level", "warn",
	})
	if err != nil {
		return nil, err
	}
	err = poll(ctx, 100*time.Millisecond, func() (bool, error) {
		if err := c.proc.Err(); err != nil {
			return false, fmt.Errorf("containerd exited: %v; its log ends:\n%s", err, c.proc.LogTail(20))
		}
		_, err := c.ctr(ctx, "version")
		return err == nil, nil
	})
	if err != nil {
		return nil, fmt.Errorf("wait for containerd: %w", err)
	}
	return c, nil
}

// ctr runs Debian's ctr against this containerd, in the CRI's namespace.
func (c *Containerd) ctr(ctx context.Context, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	argv := append([]string{"--address", c.Socket, "--namespace", containerdNamespace}, args...)
	out, err := exec.CommandContext(ctx, "ctr", argv...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("ctr %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// Import loads an image archive (docker-archive or oci-archive) into the
// CRI's image store; pods use it with imagePullPolicy Never.
func (c *Containerd) Import(ctx context.Context, archive string) error {
	_, err := c.ctr(ctx, "images", "import", archive) // unpacked for the CRI's snapshotter
	return err
}

// TaskPID returns the host pid of a container's first process, by the
// container id the kubelet reports (without the containerd:// prefix).
func (c *Containerd) TaskPID(ctx context.Context, id string) (int, error) {
	out, err := c.ctr(ctx, "tasks", "ls")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) >= 3 && f[0] == id {
			var pid int
			if _, err := fmt.Sscan(f[1], &pid); err == nil && pid > 0 {
				return pid, nil
			}
		}
	}
	return 0, fmt.Errorf("find the task of container %s: not running", id)
}

// containers lists the ids of every container (pod sandboxes included).
func (c *Containerd) containers(ctx context.Context) ([]string, error) {
	out, err := c.ctr(ctx, "containers", "ls", "-q")
	if err != nil {
		return nil, err
	}
	return strings.Fields(out), nil
}

// netnsOf returns the network namespace path a container's spec joins
// (a sandbox's own, made by the CRI plugin), or "".
func (c *Containerd) netnsOf(ctx context.Context, id string) string {
	out, err := c.ctr(ctx, "containers", "info", id)
	if err != nil {
		return ""
	}
	var info struct {
		Spec struct {
			Linux struct {
				Namespaces []struct{ Type, Path string }
			}
		}
	}
	if json.Unmarshal([]byte(out), &info) != nil {
		return ""
	}
	for _, ns := range info.Spec.Linux.Namespaces {
		if ns.Type == "network" {
			return ns.Path
		}
	}
	return ""
}

// stop removes every container it still runs (killing their tasks), the
// network namespaces its sandboxes made, then containerd itself. It returns
// what it could not remove.
func (c *Containerd) stop() []error {
	if c == nil || c.proc == nil {
		return nil
	}
	var errs []error
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if c.proc.Err() == nil {
		ids, err := c.containers(ctx)
		if err != nil {
			errs = append(errs, err)
		}
		var netns []string
		for _, id := range ids {
			if p := c.netnsOf(ctx, id); p != "" {
				netns = append(netns, p)
			}
			// The CNI library's cache of a sandbox killed without CNI DEL.
			for _, name := range []string{"hapsuper-test-" + id + "-eth0", "cni-loopback-" + id + "-lo"} {
				if err := os.Remove(filepath.Join("/var/lib/cni/results", name)); err != nil && !os.IsNotExist(err) {
					errs = append(errs, err)
				}
			}
			_, _ = c.ctr(ctx, "tasks", "kill", "--signal", "SIGKILL", id)
			_, _ = c.ctr(ctx, "tasks", "delete", "--force", id)
			if _, err := c.ctr(ctx, "containers", "delete", id); err != nil {
				errs = append(errs, err)
			}
		}
		for _, p := range netns {
			if !strings.HasPrefix(p, netnsDir+"/") && !strings.HasPrefix(p, "/run/netns/") {
				continue // a path of a process (host network): not the plugin's
			}
			if err := deleteNetNS(filepath.Base(p)); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if err := c.proc.Crashed(); err != nil {
		errs = append(errs, fmt.Errorf("containerd exited during the test: %v; its log ends:\n%s", err, c.proc.LogTail(20)))
	}
	if err := c.proc.Kill(); err != nil {
		errs = append(errs, err)
	}
	for _, dir := range c.cgroups {
		if err := os.Remove(dir); err != nil && !os.IsNotExist(err) {
			errs = append(errs, fmt.Errorf("remove cgroup %s: %w", dir, err))
		}
	}
	return errs
}

// missingCgroupParents lists /sys/fs/cgroup/<controller>/k8s.io for every
// cgroup v1 controller where it does not exist yet: runc makes it as the
// parent of the CRI's containers (the kubelet runs without QoS cgroups) and
// leaves it, empty, after the last one.
func missingCgroupParents() []string {
	controllers, _ := os.ReadDir("/sys/fs/cgroup")
	var out []string
	for _, e := range controllers {
		if !e.IsDir() {
			continue // cpu,cpuacct links and files
		}
		dir := filepath.Join("/sys/fs/cgroup", e.Name(), containerdNamespace)
		if _, err := os.Stat(dir); os.IsNotExist(err) {
			out = append(out, dir)
		}
	}
	return out
}
