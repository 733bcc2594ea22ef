package k8stest

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// kubeletHostPaths are the machine's paths that the kubelet (device plugin
// socket, container log links), containerd's shims (sockets, under
// /run/containerd/s) and the CNI library (results cache) write whatever
// their configuration says. Those that did not exist before the kubelet
// started are removed at teardown; in those that did, only the entries of
// this kubelet's containers are.
var kubeletHostPaths = []string{"/var/lib/kubelet", "/var/log/containers", "/var/lib/cni", "/run/containerd"}

// kubeletCreated records, while a kubelet runs, the kubeletHostPaths it
// made: a run that crashed before removing them hands them to the next.
const kubeletCreated = slotLockDir + "/kubelet-created"

// claimHostPaths notes which kubeletHostPaths do not exist yet, adds those
// a crashed run made (its record), and records them all.
func (k *Kubelet) claimHostPaths() error {
	if data, err := os.ReadFile(kubeletCreated); err == nil {
		for _, p := range strings.Fields(string(data)) {
			if slices.Contains(kubeletHostPaths, p) {
				k.created = append(k.created, p)
			}
		}
	}
	for _, p := range kubeletHostPaths {
		if _, err := os.Lstat(p); os.IsNotExist(err) && !slices.Contains(k.created, p) {
			k.created = append(k.created, p)
		}
	}
	if err := os.WriteFile(kubeletCreated, []byte(strings.Join(k.created, "\n")+"\n"), 0o600); err != nil {
		return fmt.Errorf("record the kubelet's host paths: %w", err)
	}
	return nil
}

// removeHostPaths removes the kubeletHostPaths this kubelet made, and in
// the others the container log links that point into its directory.
func (k *Kubelet) removeHostPaths() []error {
	var errs []error
	for _, p := range k.created {
		if err := os.RemoveAll(p); err != nil {
			errs = append(errs, fmt.Errorf("remove %s: %w", p, err))
		}
	}
	if len(errs) == 0 {
		if err := os.Remove(kubeletCreated); err != nil && !os.IsNotExist(err) {
			errs = append(errs, err)
		}
	}
	if slices.Contains(k.created, "/var/log/containers") {
		return errs
	}
	links, _ := os.ReadDir("/var/log/containers")
	for _, l := range links {
		p := filepath.Join("/var/log/containers", l.Name())
		if target, err := os.Readlink(p); err == nil && strings.HasPrefix(target, k.dir+"/") {
			if err := os.Remove(p); err != nil {
				errs = append(errs, fmt.Errorf("remove %s: %w", p, err))
			}
		}
	}
	return errs
}

// unmountUnder detaches every mount below dir, deepest first (the
// kubelet's volume mounts, containerd's rootfs mounts).
func unmountUnder(dir string) []error {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return []error{fmt.Errorf("read mounts: %w", err)}
	}
	defer f.Close()
	var points []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && strings.HasPrefix(fields[4], dir+"/") {
			points = append(points, unescapeMount(fields[4]))
		}
	}
	slices.SortFunc(points, func(a, b string) int { return len(b) - len(a) })
	var errs []error
	for _, p := range points {
		if err := unix.Unmount(p, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("unmount %s: %w", p, err))
		}
	}
	return errs
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var c int
			if _, err := fmt.Sscanf(s[i+1:i+4], "%o", &c); err == nil {
				b.WriteByte(byte(c))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
