package k8s_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/hapsuper/hapsuper/drain"
	"github.com/hapsuper/hapsuper/test/harness"
	"github.com/hapsuper/hapsuper/test/k8s/k8stest"
)

// realPod is what the test saw of one pod the kubelet ran: its log as the
// kubelet streamed it, its processes as the host saw them, its status
// through exec while it drained, and how its container ended.
type realPod struct {
	name string
	log  harness.Log

	mu          sync.Mutex
	containerID string
	processes   processCheck
	inspectErr  error
	deletedAt   time.Time // deletionTimestamp
	grace       int64     // deletionGracePeriodSeconds
	terminated  *corev1.ContainerStateTerminated
	status      string // hapsuper status --json, run through exec while draining
	statusErr   error
	gone        bool
}

// processCheck is the container's process tree, read from the host's /proc.
type processCheck struct {
	pid1Comm  string   // comm of the container's first process
	nsPID     string   // its pid in the container's pid namespace
	haproxy   []string // "<comm> uid=<uid>" of every HAProxy process under it
	cgroupDir string   // its cgroup (pids controller), checked empty after exit
	master    int      // host pid of the HAProxy process whose parent is the first process
	twBuckets string   // net.ipv4.tcp_max_tw_buckets in the pod's network namespace (the harness's CNI sets 0)
}

// podWatch follows every pod of a namespace: it streams each container's
// log from its start, inspects its processes, runs `hapsuper status
// --json` through exec once the pod is deleted, and keeps how it ended.
type podWatch struct {
	t  *testing.T
	h  *k8stest.Harness
	ns string

	mu   sync.Mutex
	pods map[string]*realPod
	wg   sync.WaitGroup
	stop func() // ends the watch and waits for its goroutines; idempotent
}

// watchPods starts the watch; it runs until ctx ends or stop, which the
// test's cleanup calls.
func watchPods(ctx context.Context, t *testing.T, h *k8stest.Harness, ns string) *podWatch {
	ctx, cancel := context.WithCancel(ctx)
	w := &podWatch{t: t, h: h, ns: ns, pods: map[string]*realPod{}}
	w.stop = sync.OnceFunc(func() { cancel(); w.wg.Wait() })
	t.Cleanup(w.stop)
	w.wg.Go(func() { w.run(ctx) })
	return w
}

// run re-watches from the last version seen until ctx ends.
func (w *podWatch) run(ctx context.Context) {
	rv := ""
	for ctx.Err() == nil {
		wi, err := w.h.Client.CoreV1().Pods(w.ns).Watch(ctx, metav1.ListOptions{ResourceVersion: rv})
		if err != nil {
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
			continue
		}
		for ev := range wi.ResultChan() {
			pod, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			rv = pod.ResourceVersion
			w.seen(ctx, ev.Type, pod)
		}
		wi.Stop()
	}
}

// get returns the record of a pod, made on first use.
func (w *podWatch) get(name string) *realPod {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.pods[name] == nil {
		w.pods[name] = &realPod{name: name}
	}
	return w.pods[name]
}

// all returns every pod seen, in no order.
func (w *podWatch) all() []*realPod {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Collect(maps.Values(w.pods))
}

func (w *podWatch) seen(ctx context.Context, typ watch.EventType, pod *corev1.Pod) {
	p := w.get(pod.Name)
	p.mu.Lock()
	defer p.mu.Unlock()
	if typ == watch.Deleted {
		p.gone = true
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name != "haproxy" {
			continue
		}
		if cs.State.Running != nil && p.containerID == "" && cs.ContainerID != "" {
			p.containerID = strings.TrimPrefix(cs.ContainerID, "containerd://")
			w.wg.Add(2)
			go func() { defer w.wg.Done(); w.followLog(ctx, pod.Name, p) }()
			go func(id string) { defer w.wg.Done(); w.inspect(ctx, p, id) }(p.containerID)
		}
		if cs.State.Terminated != nil {
			p.terminated = cs.State.Terminated.DeepCopy()
		}
	}
	if pod.DeletionTimestamp != nil && p.deletedAt.IsZero() {
		p.deletedAt = pod.DeletionTimestamp.Time
		if pod.DeletionGracePeriodSeconds != nil {
			p.grace = *pod.DeletionGracePeriodSeconds
		}
		w.wg.Add(1)
		go func() { defer w.wg.Done(); w.statusWhileDraining(ctx, pod.Name, p) }()
	}
}

// followLog streams the container's log through the apiserver and the
// kubelet until the container exits.
func (w *podWatch) followLog(ctx context.Context, name string, p *realPod) {
	req := w.h.Client.CoreV1().Pods(w.ns).GetLogs(name, &corev1.PodLogOptions{Container: "haproxy", Follow: true})
	for try := 0; try < 20 && ctx.Err() == nil; try++ {
		stream, err := req.Stream(ctx)
		if err == nil {
			p.log.Read(stream)
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// statusWhileDraining runs `hapsuper status --json` in the pod through exec
// from its deletion on, until it answers a phase other than serving: the
// deletion is seen here before the kubelet sends the stop signal (by up to a
// second on this machine), and asked too early the pod still serves.
func (w *podWatch) statusWhileDraining(ctx context.Context, name string, p *realPod) {
	var out string
	var err error
	for try := 0; try < 30 && ctx.Err() == nil; try++ {
		ectx, cancel := context.WithTimeout(ctx, 5*time.Second)
		out, _, err = w.h.Exec(ectx, w.ns, name, "haproxy", "hapsuper", "status", "--json")
		cancel()
		if err == nil && statusPhase(out) != string(drain.Serving) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	p.mu.Lock()
	p.status, p.statusErr = out, err
	p.mu.Unlock()
}

// statusPhase is the phase `hapsuper status --json` printed, "" if none.
func statusPhase(out string) string {
	var st struct {
		Phase string `json:"phase"`
	}
	if json.Unmarshal([]byte(out), &st) != nil {
		return ""
	}
	return st.Phase
}

// inspect reads the container's process tree from the host: its first
// process (hapsuper, pid 1 of its namespace) and the HAProxy processes
// below it, once the HAProxy workers run.
func (w *podWatch) inspect(ctx context.Context, p *realPod, id string) {
	var check processCheck
	var err error
	for try := 0; try < 100 && ctx.Err() == nil; try++ {
		check, err = readProcesses(ctx, w.h.Kubelet().Containerd, id)
		if err == nil && len(check.haproxy) >= 2 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	p.mu.Lock()
	p.processes, p.inspectErr = check, err
	p.mu.Unlock()
}

func readProcesses(ctx context.Context, c *k8stest.Containerd, id string) (processCheck, error) {
	var check processCheck
	pid, err := c.TaskPID(ctx, id)
	if err != nil {
		return check, err
	}
	comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err != nil {
		return check, fmt.Errorf("read the container's first process: %w", err)
	}
	check.pid1Comm = strings.TrimSpace(string(comm))
	// A sysctl under /proc/sys/net is the reader's network namespace's.
	tw, err := exec.CommandContext(ctx, "nsenter", "-t", strconv.Itoa(pid), "-n", "cat", "/proc/sys/net/ipv4/tcp_max_tw_buckets").Output()
	if err != nil {
		return check, fmt.Errorf("read the pod's tcp_max_tw_buckets: %w", err)
	}
	check.twBuckets = strings.TrimSpace(string(tw))
	status := procStatus(pid)
	if f := strings.Fields(status["NSpid"]); len(f) > 0 {
		check.nsPID = f[len(f)-1]
	}
	cg, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return check, fmt.Errorf("read the container's cgroup: %w", err)
	}
	for _, line := range strings.Split(string(cg), "\n") {
		// hierarchy-ID:controller-list:path (cgroup v1)
		parts := strings.SplitN(line, ":", 3)
		if len(parts) == 3 && (parts[1] == "pids" || parts[1] == "") {
			check.cgroupDir = filepath.Join("/sys/fs/cgroup", parts[1], parts[2])
			if parts[1] == "pids" {
				break
			}
		}
	}
	for _, child := range descendants(pid) {
		comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", child))
		if err != nil {
			continue
		}
		status := procStatus(child)
		if uid := strings.Fields(status["Uid"]); len(uid) > 0 {
			check.haproxy = append(check.haproxy, strings.TrimSpace(string(comm))+" uid="+uid[0])
		}
		if strings.TrimSpace(string(comm)) == "haproxy" && status["PPid"] == strconv.Itoa(pid) {
			check.master = child
		}
	}
	return check, nil
}

// procStatus reads /proc/<pid>/status into its fields.
func procStatus(pid int) map[string]string {
	data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	out := map[string]string{}
	for _, line := range strings.Split(string(data), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			out[k] = strings.TrimSpace(v)
		}
	}
	return out
}

// descendants lists every process below pid, from /proc's PPid fields.
func descendants(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	children := map[int][]int{}
	for _, e := range entries {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if pp, err := strconv.Atoi(procStatus(n)["PPid"]); err == nil {
			children[pp] = append(children[pp], n)
		}
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}

// cgroupProcs returns the processes left in a cgroup directory ("" when the
// directory is gone: runc removed it).
func cgroupProcs(dir string) (string, error) {
	data, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if os.IsNotExist(err) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(data)), nil
}
