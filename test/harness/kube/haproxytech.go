package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/hapsuper/hapsuper/test/harness"
	"github.com/hapsuper/hapsuper/test/k8s/k8stest"
)

// HAProxy Technologies' kubernetes-ingress as deploy/haproxytech-ingress
// runs it: the chart its values are for (hack/charts.sh copies the
// tarball), its default release name, and the controller release the
// harness runs, built from the peers' source tarball by
// hack/haproxytech-controller.sh into HAProxyTechControllerDir.
const (
	HAProxyTechChart            = "1.52.1"
	HAProxyTechChartTarball     = "haproxytech-kubernetes-ingress-chart-1.52.1.tar.gz"
	HAProxyTechChartSHA256      = "68cfc55ba11f651c857ae94ddccf0c2654edfe8a0b154972e165d779f5cb260b"
	HAProxyTechRelease          = "haproxy-kubernetes-ingress"
	HAProxyTechController       = "v3.2.11"
	HAProxyTechControllerSHA256 = "c0b95aa8006a64428d1beabfa9ed1f606e44ca5ef654df27659c9097d8f2992c"
)

// TechUID is the user the chart's unprivileged mode (its default) runs the
// container as, the image's haproxy.
const TechUID = 1000

// RenderHAProxyTechIn renders chart 1.52.1 with
// deploy/haproxytech-ingress/values.yaml, released in ns.
func RenderHAProxyTechIn(t harness.TB, ns string) Rendered {
	t.Helper()
	values := filepath.Join(DeployDir(t), "haproxytech-ingress", "values.yaml")
	return HelmTemplate(t, HAProxyTechChartTarball, HAProxyTechChartSHA256, "kubernetes-ingress", HAProxyTechRelease, ns, values)
}

// HAProxyTechControllerDir is hack/haproxytech-controller.sh's directory:
// ${HAPSUPER_HAPROXYTECH_CACHE:-/var/cache/hapsuper/haproxytech-controller}/v3.2.11-<sha256[:12]>,
// holding haproxy-ingress-controller and the image's haproxy.cfg. Without
// them the test skips, and fails under CI=true (setup builds them).
func HAProxyTechControllerDir(t harness.TB) string {
	t.Helper()
	root := os.Getenv("HAPSUPER_HAPROXYTECH_CACHE")
	if root == "" {
		root = "/var/cache/hapsuper/haproxytech-controller"
	}
	dir := filepath.Join(root, HAProxyTechController+"-"+HAProxyTechControllerSHA256[:12])
	for _, f := range []string{"haproxy-ingress-controller", "haproxy.cfg"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			msg := fmt.Sprintf("kubernetes-ingress %s: %v (run hack/haproxytech-controller.sh, 8-14 min)", HAProxyTechController, err)
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s", msg)
			}
			t.Skipf("%s", msg)
		}
	}
	return dir
}

// TechPod is the rendered kubernetes-ingress pod: its one container
// (hapsuper, HAProxy and the controller), its labels and ServiceAccount.
type TechPod struct {
	Spec      corev1.PodSpec
	Container corev1.Container
	Labels    map[string]string
}

// ParseTechPod takes the Deployment out of r.
func ParseTechPod(r Rendered) (TechPod, error) {
	ds := r.Find("Deployment")
	if len(ds) != 1 {
		return TechPod{}, fmt.Errorf("rendered %v: want one Deployment", r.Kinds())
	}
	var d appsv1.Deployment
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(ds[0].Object, &d); err != nil {
		return TechPod{}, fmt.Errorf("decode Deployment: %w", err)
	}
	p := TechPod{Spec: d.Spec.Template.Spec, Labels: d.Spec.Template.Labels}
	if len(p.Spec.Containers) != 1 {
		return TechPod{}, fmt.Errorf("Deployment %s has %d containers: want the one of HAProxy and the controller", d.Name, len(p.Spec.Containers))
	}
	p.Container = p.Spec.Containers[0]
	return p, nil
}

// DropIn is what deploy/haproxytech-ingress/Dockerfile gives the
// container: its ENV (in order) and ENTRYPOINT.
type DropIn struct {
	Env        []string // KEY=value
	Entrypoint []string
}

var envPair = regexp.MustCompile(`([A-Z_][A-Z0-9_]*)=("([^"]*)"|\S+)`)

// ReadDropIn reads the Dockerfile's ENV and ENTRYPOINT instructions.
func ReadDropIn(t harness.TB) DropIn {
	t.Helper()
	path := filepath.Join(DeployDir(t), "haproxytech-ingress", "Dockerfile")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v", err)
	}
	var d DropIn
	text := strings.ReplaceAll(string(b), "\\\n", " ")
	for _, line := range strings.Split(text, "\n") {
		switch {
		case strings.HasPrefix(line, "ENV "):
			for _, m := range envPair.FindAllStringSubmatch(line, -1) {
				v := m[2]
				if strings.HasPrefix(v, `"`) {
					v = m[3]
				}
				d.Env = append(d.Env, m[1]+"="+v)
			}
		case strings.HasPrefix(line, "ENTRYPOINT "):
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "ENTRYPOINT ")), &d.Entrypoint); err != nil {
				t.Fatalf("%s: ENTRYPOINT: %v", path, err)
			}
		}
	}
	if len(d.Env) == 0 || len(d.Entrypoint) == 0 {
		t.Fatalf("%s: no ENV or no ENTRYPOINT read: update ReadDropIn", path)
	}
	return d
}

// MakeTechLayer writes, into dir, what the drop-in image adds over a root
// holding HAProxy (one of hack/haproxy-root.sh's): as the controller's
// image lays it out, the controller at /haproxy-ingress-controller, the
// image's /etc/haproxy/haproxy.cfg, /usr/local/sbin/haproxy and the
// haproxy_wrapper (here a script that execs it: the real one sets
// LD_PRELOAD), user haproxy as uid 1000 owning /etc/haproxy and
// /var/state/haproxy; and as the Dockerfile adds, hapsuper at
// /usr/local/bin/hapsuper and gopherd and s6-svc linked to it (in
// /usr/local/bin and /command). Large files are hard links when they can
// be. root is the HAProxy root, for its passwd and group.
func MakeTechLayer(t harness.TB, dir, root, hapsuper, controllerDir string) {
	t.Helper()
	for _, d := range []string{"usr/local/bin", "usr/local/sbin", "command", "etc/haproxy", "var/state/haproxy"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatalf("%v", err)
		}
	}
	files := []struct{ src, dst string }{
		{filepath.Join(controllerDir, "haproxy-ingress-controller"), "haproxy-ingress-controller"},
		{hapsuper, "usr/local/bin/hapsuper"},
		{filepath.Join(controllerDir, "haproxy.cfg"), "etc/haproxy/haproxy.cfg"},
	}
	for _, f := range files {
		if err := linkOrCopy(f.src, filepath.Join(dir, f.dst)); err != nil {
			t.Fatalf("%v", err)
		}
	}
	links := map[string]string{
		"usr/local/bin/gopherd":  "/usr/local/bin/hapsuper",
		"usr/local/bin/s6-svc":   "/usr/local/bin/hapsuper",
		"command/s6-svc":         "/usr/local/bin/hapsuper",
		"usr/local/sbin/haproxy": "/usr/sbin/haproxy",
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatalf("%v", err)
		}
	}
	wrapper := "#!/bin/sh\n# The image's haproxy_wrapper sets LD_PRELOAD and execs HAProxy.\nexec /usr/local/sbin/haproxy \"$@\"\n"
	if err := os.WriteFile(filepath.Join(dir, "usr/local/sbin/haproxy_wrapper"), []byte(wrapper), 0o755); err != nil {
		t.Fatalf("%v", err)
	}
	for name, line := range map[string]string{
		"passwd": fmt.Sprintf("haproxy:x:%d:%d::/var/lib/haproxy:/usr/sbin/nologin", TechUID, TechUID),
		"group":  fmt.Sprintf("haproxy:x:%d:", TechUID),
	} {
		b, err := os.ReadFile(filepath.Join(root, "etc", name))
		if err != nil {
			t.Fatalf("%v", err)
		}
		lines := []string{line}
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if !strings.HasPrefix(l, "haproxy:") {
				lines = append(lines, l)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, "etc", name), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			t.Fatalf("%v", err)
		}
	}
	for _, d := range []string{"etc/haproxy", "etc/haproxy/haproxy.cfg", "var/state", "var/state/haproxy"} {
		if err := os.Lchown(filepath.Join(dir, d), TechUID, TechUID); err != nil {
			t.Fatalf("%v", err)
		}
	}
}

// linkOrCopy hard-links src at dst, or copies it (another file system).
func linkOrCopy(src, dst string) error {
	if err := os.Link(src, dst); err == nil {
		return nil
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, fi.Mode().Perm())
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// TechContainer is one pod's container: the drop-in image's root made of
// the layer over an HAProxy root (overlayfs, the pod's own upper
// directory), the chart's emptyDir subPaths at /run and /tmp, the
// ServiceAccount token where the kubelet projects it, in PID, mount and
// UTS namespaces of its own (the pod's name as its hostname), run as uid
// 1000 in the pod's network namespace. The process is hapsuper itself,
// PID 1 in its namespace (every step before it execs).
type TechContainer struct {
	*Container
	Dir   string // the pod's directory: upper, work, rootfs, run, tmp, serviceaccount
	MntNS string // the container's mount namespace, as /proc/<pid>/ns/mnt reads
}

// Run is where the container's /run is on this machine (the chart's tmp
// emptyDir, subPath run): HAProxy's master socket, hapsuper's directory.
func (c *TechContainer) Run() string { return filepath.Join(c.Dir, "run") }

// TechMounts are the directories StartTech mounts besides the layers.
type TechMounts struct {
	Layer, Root string // the drop-in's layer (MakeTechLayer) over an HAProxy root
	Token       string // a directory holding token, ca.crt, namespace
}

// StartTech starts the container of pod in dir: argv (the image's
// ENTRYPOINT and the chart's args) with env, after the mounts. The
// emptyDir's run and tmp are made mode 1777 (a Memory emptyDir is a
// tmpfs of that mode).
func StartTech(t harness.TB, pod *k8stest.Pod, dir string, m TechMounts, env, argv []string) *TechContainer {
	t.Helper()
	for _, d := range []string{"upper", "work", "rootfs", "run", "tmp"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatalf("%v", err)
		}
	}
	for _, d := range []string{"run", "tmp"} {
		if err := os.Chmod(filepath.Join(dir, d), os.ModeSticky|0o777); err != nil {
			t.Fatalf("%v", err)
		}
	}
	script := `set -eu
mount --make-rprivate /
r=$1/rootfs
mount -t overlay overlay -o "lowerdir=$2:$3,upperdir=$1/upper,workdir=$1/work" "$r"
mount -t proc proc "$r/proc"
mount --rbind /dev "$r/dev"
mount --bind "$1/run" "$r/run"
mount --bind "$1/tmp" "$r/tmp"
mkdir -p "$r/run/secrets/kubernetes.io/serviceaccount"
mount --bind -o ro "$4" "$r/run/secrets/kubernetes.io/serviceaccount"
echo "$5" >/proc/sys/kernel/hostname
shift 5
exec chroot --userspec=` + strconv.Itoa(TechUID) + ":" + strconv.Itoa(TechUID) + ` "$r" "$@"`
	full := append([]string{"sh", "-c", script, "sh", dir, m.Layer, m.Root, m.Token, pod.Name}, argv...)
	cmd := pod.Command(context.Background(), full[0], full[1:]...)
	cmd.Env = env
	// PID, mount and UTS namespaces of the container's own: every step
	// execs, so hapsuper is PID 1 of the first, and its end ends every
	// process left in it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL,
		Cloneflags: syscall.CLONE_NEWPID | syscall.CLONE_NEWNS | syscall.CLONE_NEWUTS}
	p, err := harness.Start(cmd)
	if err != nil {
		t.Fatalf("pod %s: %v", pod.Name, err)
	}
	c := &TechContainer{Container: &Container{Pod: pod, Process: p}, Dir: dir}
	t.Cleanup(func() {
		// The container's processes are those of its mount namespace:
		// kill what is left (hapsuper's children outlive a SIGKILL of it).
		c.Kill()
		for _, pid := range c.Processes() {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	return c
}

// Processes lists the processes in the container's mount namespace, once
// it is known (after the first process's chroot).
func (c *TechContainer) Processes() []int {
	if c.MntNS == "" {
		return nil
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", pid)); err == nil && ns == c.MntNS {
			out = append(out, pid)
		}
	}
	return out
}

// NoteNamespace records the container's mount namespace, and checks that
// hapsuper is PID 1 of its PID namespace; call it once hapsuper logged (it
// runs in them by then).
func (c *TechContainer) NoteNamespace() error {
	ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", c.Pid()))
	if err != nil {
		return fmt.Errorf("read the mount namespace of pod %s: %w", c.Name, err)
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", c.Pid()))
	if err != nil {
		return fmt.Errorf("read the status of pod %s's hapsuper: %w", c.Name, err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "NSpid:"); ok {
			if f := strings.Fields(v); len(f) < 2 || f[len(f)-1] != "1" {
				return fmt.Errorf("pod %s: hapsuper's NSpid is %q: want PID 1 of its own PID namespace", c.Name, strings.TrimSpace(v))
			}
		}
	}
	self, _ := os.Readlink("/proc/self/ns/mnt")
	if ns == self {
		return fmt.Errorf("pod %s: hapsuper runs in the test's mount namespace", c.Name)
	}
	c.MntNS = ns
	return nil
}
