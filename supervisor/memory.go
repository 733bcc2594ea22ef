package supervisor

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/hapsuper/hapsuper/conf"
	"github.com/hapsuper/hapsuper/haproxy"
)

// cgroupRoot is where the container's own cgroup is mounted (with a cgroup
// namespace, as containerd and CRI-O give a pod's containers).
const cgroupRoot = "/sys/fs/cgroup"

// unlimitedV1 is the least value cgroup v1 reports for "no limit"
// (PAGE_COUNTER_MAX pages, 9223372036854771712 on 4 KiB pages).
const unlimitedV1 = 1 << 62

// memoryLimit returns the memory limit in bytes of the cgroup mounted at
// root, as gopherd's and s6's run scripts read it: cgroup v2's memory.max,
// else cgroup v1's memory/memory.limit_in_bytes. 0 means no limit: "max",
// v1's near-2^63, or no such file (not in a container, no memory controller).
func memoryLimit(root string) (int64, error) {
	path := filepath.Join(root, "memory.max")
	if _, err := os.Stat(filepath.Join(root, "cgroup.controllers")); err != nil {
		path = filepath.Join(root, "memory", "memory.limit_in_bytes")
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read the cgroup memory limit %s: %w", path, err)
	}
	v := strings.TrimSpace(string(b))
	if v == "max" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("read the cgroup memory limit %s: %q is not a byte count", path, v)
	}
	if n >= unlimitedV1 {
		return 0, nil
	}
	return n, nil
}

// haproxyMemory is the -m hapsuper gives HAProxy: --haproxy-memory-share of
// the cgroup memory limit under root, in MiB; 0 (no -m) when the share is
// off, there is no limit, or it cannot be read (logged: HAProxy then runs
// uncapped, as without hapsuper).
func (sv *Supervisor) haproxyMemory(root string) int64 {
	share := sv.settings.HAProxyMemoryShare
	if share == 0 {
		return 0
	}
	limit, err := memoryLimit(root)
	if err != nil {
		sv.log.Warn("cannot read the memory limit: HAProxy gets no -m", "err", err)
		return 0
	}
	if limit == 0 {
		sv.log.Info("no cgroup memory limit: HAProxy gets no -m", "haproxy-memory-share", share)
		return 0
	}
	mb := haproxy.MemoryShare(limit, share)
	sv.log.Info("memory limit for HAProxy", "limit_bytes", limit, "haproxy-memory-share", share, "m_mib", mb)
	return mb
}

// companionEnv is env with GOMEMLIMIT=<MiB>MiB added for the companion:
// --companion-memory-share of the cgroup memory limit under root, as
// gopherd gives the controller {{mem 33%}}. env is returned unchanged when
// the share is off, there is no limit, or env sets GOMEMLIMIT already (a
// chart's extraEnvs win).
func (sv *Supervisor) companionEnv(root string, env []string) []string {
	share := sv.settings.CompanionMemoryShare
	if share == 0 || slices.ContainsFunc(env, func(kv string) bool { return strings.HasPrefix(kv, "GOMEMLIMIT=") }) {
		return env
	}
	limit, err := memoryLimit(root)
	if err != nil {
		sv.log.Warn("cannot read the memory limit: the companion gets no GOMEMLIMIT", "err", err)
		return env
	}
	mb := haproxy.MemoryShare(limit, share)
	if mb == 0 {
		return env
	}
	sv.log.Info("memory limit for the companion", "limit_bytes", limit, "companion-memory-share", share, "GOMEMLIMIT", strconv.FormatInt(mb, 10)+"MiB")
	return append(slices.Clone(env), "GOMEMLIMIT="+strconv.FormatInt(mb, 10)+"MiB")
}

// checkMemoryShares checks the memory shares together: HAProxy's and the
// companion's (when there is one) must add up to at most the whole limit,
// else both may grow past it and the kernel's OOM killer, not their own
// limits, ends the container.
func checkMemoryShares(s conf.Settings) error {
	h, c := s.HAProxyMemoryShare, s.CompanionMemoryShare
	if s.Companion == "" || h == 0 || c == 0 || h+c <= 100 {
		return nil
	}
	return fmt.Errorf("--haproxy-memory-share %d (%s) and --companion-memory-share %d (%s) add up to %d%% of the container's memory limit: lower them to at most 100 together (gopherd's images give 66 and 33)",
		h, conf.EnvName("haproxy-memory-share"), c, conf.EnvName("companion-memory-share"), h+c)
}

// minOwnMemory is the least soft limit hapsuper gives itself: a few times
// what it keeps live with routing on over thousands of nodes and slices.
const minOwnMemory = 64 << 20

// ownMemoryLimit is hapsuper's memory policy, set once at start: a soft
// limit for its own Go heap (set: debug.SetMemoryLimit) from the
// container's cgroup memory limit under root, the part HAProxy's -m and
// the companion's GOMEMLIMIT do not take (--haproxy-memory-share,
// --companion-memory-share), so that hapsuper's collector works harder
// before the container nears its limit rather than after; never below
// minOwnMemory. GOGC is left as
// it is; without a limit (none, or unreadable) nothing is set, and a
// GOMEMLIMIT in hapsuper's own environment wins (the runtime applied it).
// It returns the soft limit set, 0 when none, and logs what it did.
func (sv *Supervisor) ownMemoryLimit(root string, getenv func(string) string, set func(int64) int64) int64 {
	if v := getenv("GOMEMLIMIT"); v != "" {
		sv.log.Info("memory limit for hapsuper from its environment", "GOMEMLIMIT", v)
		return 0
	}
	limit, err := memoryLimit(root)
	if err != nil {
		sv.log.Warn("cannot read the memory limit: hapsuper's collector runs on GOGC alone", "err", err)
		return 0
	}
	if limit == 0 {
		sv.log.Info("no cgroup memory limit: hapsuper's collector runs on GOGC alone")
		return 0
	}
	shares := sv.settings.HAProxyMemoryShare
	if sv.settings.Companion != "" {
		shares += sv.settings.CompanionMemoryShare
	}
	// Never below minOwnMemory (within the limit): a soft limit under
	// what hapsuper needs live would have its collector run without end.
	left := int64(100 - min(shares, 100))
	own := min(limit, max(limit/100*left+limit%100*left/100, minOwnMemory))
	set(own)
	sv.log.Info("memory limit for hapsuper: a soft limit on its Go heap, GOGC unchanged", "limit_bytes", limit, "soft_limit_bytes", own)
	return own
}
