package k8stest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// removeStaleContainers stops what a kubelet node of a crashed run left
// running: its containerd and kubelet die with the test process and its
// shims are killed by their command line, but the containers' processes
// survive their shim. Each task directory of that run's containerd state
// names the container's first process (init.pid) and its spec
// (config.json, with the sandbox's network namespace): the process is
// killed (with its pid namespace) when /proc still shows it in that
// container's cgroup, the namespace is deleted and the container's cgroups
// removed.
func removeStaleContainers(dir string, logf func(format string, args ...any)) []error {
	tasks, _ := filepath.Glob(filepath.Join(dir, "containerd", "state", "io.containerd.runtime.v2.task", containerdNamespace, "*"))
	var errs []error
	for _, task := range tasks {
		id := filepath.Base(task)
		if data, err := os.ReadFile(filepath.Join(task, "init.pid")); err == nil {
			pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
			if cg, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid)); err == nil && pid > 1 && strings.Contains(string(cg), id) {
				logf("k8stest: killing container %.12s (pid %d) left by an earlier run", id, pid)
				_ = unix.Kill(pid, unix.SIGKILL)
			}
		}
		var spec struct {
			Linux struct {
				Namespaces  []struct{ Type, Path string }
				CgroupsPath string
			}
		}
		data, err := os.ReadFile(filepath.Join(task, "config.json"))
		if err != nil || json.Unmarshal(data, &spec) != nil {
			continue
		}
		for _, ns := range spec.Linux.Namespaces {
			if ns.Type == "network" && (filepath.Dir(ns.Path) == netnsDir || filepath.Dir(ns.Path) == "/run/netns") {
				if err := deleteNetNS(filepath.Base(ns.Path)); err != nil {
					errs = append(errs, err)
				}
			}
		}
		if spec.Linux.CgroupsPath == "" || strings.Contains(spec.Linux.CgroupsPath, "..") {
			continue
		}
		controllers, _ := os.ReadDir("/sys/fs/cgroup")
		for _, c := range controllers {
			// The killed processes leave their cgroup a moment later.
			cg := filepath.Join("/sys/fs/cgroup", c.Name(), spec.Linux.CgroupsPath)
			for try := 0; try < 40; try++ {
				if err := os.Remove(cg); err == nil || os.IsNotExist(err) {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
	}
	return errs
}
