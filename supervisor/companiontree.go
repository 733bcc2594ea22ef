package supervisor

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// companionTree holds every process the companion starts: the helpers that
// outlive it (left in its old process group, reparented to hapsuper) and
// those that leave its group (setsid) included. Nothing else ever signals
// them, and one left alive can reload HAProxy after the soft stop, so the
// companion is not gone until its tree is empty.
//
// There are two ways: a cgroup of its own under hapsuper's (cgroupTree),
// where cgroup v2 is writable, which nothing inside can leave; else the
// processes /proc shows descending from the companion or adopted by
// hapsuper (procTree). The loop's tests use a fake.
type companionTree interface {
	// way names the way for the log: "cgroup" or "proc".
	way() string
	// prepare sets attr so that the companion starts inside the tree.
	prepare(attr *syscall.SysProcAttr)
	// started records the companion's pid once it started.
	started(pid int)
	// members returns the tree's processes now, zombies not yet reaped
	// included: the tree is empty when none is left.
	members() ([]int, error)
	// signal sends sig to every live process of the tree and returns the
	// pids it reached.
	signal(sig syscall.Signal) ([]int, error)
	// close removes what holds the tree; hapsuper is ending.
	close() error
}

// procRoot is where the processes are read from.
const procRoot = "/proc"

// openCompanionTree returns the cgroup way where cgroup v2 is mounted
// writable and has cgroup.kill (Linux 5.14), else the /proc way. self is
// hapsuper's pid; other tells hapsuper's own children that are not the
// companion's (HAProxy's processes, a reload's haproxy -c) by pid and
// process group. It logs the way taken and why.
func openCompanionTree(self int, other func(pid, pgid int) bool, log *slog.Logger) companionTree {
	cg, err := openCgroupTree(procRoot, self)
	if err == nil {
		cg.other = other
		log.Info("companion containment", "way", cg.way(), "cgroup", cg.base)
		return cg
	}
	if _, perr := readStat(procRoot, self); perr != nil { // /proc absent, or an empty directory in a chroot
		log.Warn("companion containment", "way", "group", "why", errors.Join(err, perr).Error(),
			"lost", "helpers that leave the companion's process group are not stopped: mount /proc (or a writable cgroup v2) where hapsuper runs")
		return &groupTree{}
	}
	log.Info("companion containment", "way", "proc", "why", err.Error())
	return newProcTree(procRoot, self, other)
}

// groupTree is the companion's process group alone: the way where /proc
// cannot be read (a chroot without it). It is what a group's kill reaches;
// a helper that left the group (setsid) is not in it.
type groupTree struct{ pgid int }

func (t *groupTree) way() string                  { return "group" }
func (t *groupTree) prepare(*syscall.SysProcAttr) {}
func (t *groupTree) started(pid int)              { t.pgid = pid }
func (t *groupTree) close() error                 { return nil }

// members is the group's leader while the group has a process (zombies
// not yet reaped included), else none.
func (t *groupTree) members() ([]int, error) {
	if t.pgid == 0 {
		return nil, nil
	}
	if err := syscall.Kill(-t.pgid, 0); err != nil {
		if errors.Is(err, syscall.ESRCH) {
			return nil, nil
		}
		return nil, fmt.Errorf("probe process group %d: %w", t.pgid, err)
	}
	return []int{t.pgid}, nil
}

func (t *groupTree) signal(sig syscall.Signal) ([]int, error) {
	if t.pgid == 0 {
		return nil, nil
	}
	if err := syscall.Kill(-t.pgid, sig); err != nil {
		if errors.Is(err, syscall.ESRCH) {
			return nil, nil
		}
		return nil, fmt.Errorf("signal process group %d: %w", t.pgid, err)
	}
	return []int{t.pgid}, nil
}

// procTree is the companion's tree as /proc shows it: the companion, every
// process descending from it, and every process hapsuper adopted (an
// orphan of the companion's, reparented to hapsuper as PID 1 or child
// subreaper) that is not one of hapsuper's own (other). Each is known by
// (pid, start time): a process that once was in the tree stays in it while
// it lives, wherever it moves, and a later process that reuses its pid is
// never signalled. It is complete while hapsuper is PID 1 or a subreaper:
// an orphan cannot then leave hapsuper's descendants.
type procTree struct {
	root  string
	self  int
	other func(pid, pgid int) bool
	known map[int]uint64 // pid → start time of the tree's processes last seen
}

func newProcTree(root string, self int, other func(pid, pgid int) bool) *procTree {
	return &procTree{root: root, self: self, other: other, known: map[int]uint64{}}
}

func (t *procTree) way() string                  { return "proc" }
func (t *procTree) prepare(*syscall.SysProcAttr) {}

func (t *procTree) started(pid int) {
	if st, err := readStat(t.root, pid); err == nil {
		t.known[pid] = st.start
	}
}

// scan reads /proc and returns the tree's processes, remembering them.
func (t *procTree) scan() ([]procStat, error) {
	all, err := listProcs(t.root)
	if err != nil {
		return nil, err
	}
	children := map[int][]int{}
	byPID := make(map[int]procStat, len(all))
	var queue []int
	for _, p := range all {
		byPID[p.pid] = p
		children[p.ppid] = append(children[p.ppid], p.pid)
		known, ok := t.known[p.pid]
		switch {
		case p.pid == t.self:
		case ok && known == p.start:
			queue = append(queue, p.pid)
		case p.ppid == t.self && !t.other(p.pid, p.pgid):
			queue = append(queue, p.pid)
		}
	}
	in := map[int]bool{}
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		if in[pid] {
			continue
		}
		in[pid] = true
		queue = append(queue, children[pid]...)
	}
	t.known = make(map[int]uint64, len(in))
	out := make([]procStat, 0, len(in))
	for pid := range in {
		p := byPID[pid]
		t.known[pid] = p.start
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b procStat) int { return a.pid - b.pid })
	return out, nil
}

func (t *procTree) members() ([]int, error) {
	ps, err := t.scan()
	pids := make([]int, 0, len(ps))
	for _, p := range ps {
		pids = append(pids, p.pid)
	}
	return pids, err
}

func (t *procTree) signal(sig syscall.Signal) ([]int, error) {
	ps, err := t.scan()
	if err != nil {
		return nil, err
	}
	var reached []int
	var errs []error
	for _, p := range ps {
		if p.state == 'Z' {
			continue // exited: waits for its reaper
		}
		ok, err := signalProc(t.root, p.pid, p.start, sig)
		if err != nil {
			errs = append(errs, err)
		}
		if ok {
			reached = append(reached, p.pid)
		}
	}
	return reached, errors.Join(errs...)
}

func (t *procTree) close() error { return nil }

// cgroupTree is a cgroup v2 of the companion's own, a child of hapsuper's:
// the companion is started into it (clone3's CLONE_INTO_CGROUP), so
// everything it starts is in it, whatever session or parent it takes.
// cgroup.kill SIGKILLs it all at once; no controller is enabled, so
// hapsuper's cgroup is not otherwise changed.
//
// Each start gets a new cgroup: Linux 6.18 kills a process cloned into a
// cgroup that was once cgroup.kill'ed (its fork compares the kill count of
// the parent's cgroup with the target's). The earlier ones are removed
// once empty.
type cgroupTree struct {
	base string // hapsuper's cgroup in the cgroup2 mount
	own  string // hapsuper's cgroup as /proc/<pid>/cgroup names it
	self int
	n    int      // cgroups made so far
	dirs []string // the names of the cgroups not yet removed, the current last
	fd   *os.File // the next start's cgroup, for CgroupFD; nil when none is made
	proc string
	// other is hapsuper's other children (openCompanionTree), for the
	// /proc way should the kernel refuse to start into the cgroup.
	other func(pid, pgid int) bool
}

// openCgroupTree makes the first start's cgroup under hapsuper's own.
func openCgroupTree(proc string, self int) (*cgroupTree, error) {
	mount, own, err := ownCgroup(proc)
	if err != nil {
		return nil, err
	}
	t := &cgroupTree{base: filepath.Join(mount, own), own: own, self: self, proc: proc}
	if err := t.make(); err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(t.dir(), "cgroup.kill")); err != nil {
		t.close()
		return nil, fmt.Errorf("the companion's cgroup %s has no cgroup.kill (Linux 5.14 or later has): %w", t.dir(), err)
	}
	return t, nil
}

// dir is the current cgroup's directory.
func (t *cgroupTree) dir() string { return filepath.Join(t.base, t.dirs[len(t.dirs)-1]) }

// make creates the next start's cgroup and opens it.
func (t *cgroupTree) make() error {
	t.n++
	name := fmt.Sprintf("hapsuper-companion-%d-%d", t.self, t.n)
	dir := filepath.Join(t.base, name)
	err := os.Mkdir(dir, 0o755)
	if errors.Is(err, fs.ErrExist) {
		// Left by an earlier hapsuper of this pid: it must be empty.
		if err = os.Remove(dir); err == nil {
			err = os.Mkdir(dir, 0o755)
		}
	}
	if err != nil {
		return fmt.Errorf("create the companion's cgroup %s: %w", dir, err)
	}
	fd, err := os.OpenFile(dir, os.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		os.Remove(dir)
		return fmt.Errorf("open the companion's cgroup %s: %w", dir, err)
	}
	t.dirs, t.fd = append(t.dirs, name), fd
	return nil
}

// ownCgroup returns where cgroup v2 is mounted and hapsuper's cgroup below
// that mount, from /proc/self/mountinfo and /proc/self/cgroup.
func ownCgroup(proc string) (mount, own string, err error) {
	b, err := os.ReadFile(filepath.Join(proc, "self", "cgroup"))
	if err != nil {
		return "", "", fmt.Errorf("read hapsuper's cgroup: %w", err)
	}
	path, ok := "", false
	for line := range strings.SplitSeq(string(b), "\n") {
		if p, found := strings.CutPrefix(line, "0::"); found {
			path, ok = p, true
		}
	}
	if !ok {
		return "", "", errors.New("no cgroup v2 in /proc/self/cgroup")
	}
	f, err := os.Open(filepath.Join(proc, "self", "mountinfo"))
	if err != nil {
		return "", "", fmt.Errorf("read the mounts: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		// id parent major:minor root mountpoint options [optional...] - fstype source superoptions
		pre, post, found := strings.Cut(sc.Text(), " - ")
		fields, sfields := strings.Fields(pre), strings.Fields(post)
		if !found || len(fields) < 5 || len(sfields) < 1 || sfields[0] != "cgroup2" {
			continue
		}
		root, point := unescapeMount(fields[3]), unescapeMount(fields[4])
		rel, err := filepath.Rel(root, path)
		if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
			continue // this mount does not show hapsuper's cgroup
		}
		if slices.Contains(strings.Split(fields[5], ","), "ro") {
			return "", "", fmt.Errorf("cgroup v2 is mounted read-only at %s", point)
		}
		return point, filepath.Join("/", rel), nil
	}
	if err := sc.Err(); err != nil {
		return "", "", fmt.Errorf("read the mounts: %w", err)
	}
	return "", "", fmt.Errorf("no cgroup v2 mount shows hapsuper's cgroup %s", path)
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func (t *cgroupTree) way() string { return "cgroup" }

// prepare starts the companion into a cgroup of its own, made now unless
// the first one waits unused; earlier cgroups left empty are removed. When
// none can be made, attr is left as it is and the start fails over to
// /proc (companion.run).
func (t *cgroupTree) prepare(attr *syscall.SysProcAttr) {
	t.sweep()
	if t.fd == nil {
		if err := t.make(); err != nil {
			attr.UseCgroupFD, attr.CgroupFD = true, -1 // fails the start: the caller falls back
			return
		}
	}
	attr.UseCgroupFD, attr.CgroupFD = true, int(t.fd.Fd())
}

// started closes the cgroup's directory: the companion is in it.
func (t *cgroupTree) started(int) {
	if t.fd != nil {
		t.fd.Close()
		t.fd = nil
	}
}

// sweep removes the earlier starts' cgroups that are empty.
func (t *cgroupTree) sweep() {
	keep := t.dirs[:0]
	for i, name := range t.dirs {
		if i < len(t.dirs)-1 || t.fd == nil {
			if err := os.Remove(filepath.Join(t.base, name)); err == nil || errors.Is(err, fs.ErrNotExist) {
				continue
			}
		}
		keep = append(keep, name)
	}
	t.dirs = keep
}

func (t *cgroupTree) members() ([]int, error) {
	var pids []int
	for _, name := range t.dirs {
		b, err := os.ReadFile(filepath.Join(t.base, name, "cgroup.procs"))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read the companion's cgroup: %w", err)
		}
		for f := range bytes.FieldsSeq(b) {
			if pid, err := strconv.Atoi(string(f)); err == nil {
				pids = append(pids, pid)
			}
		}
	}
	slices.Sort(pids)
	return pids, nil
}

// signal writes cgroup.kill for SIGKILL: the kernel kills every process of
// the cgroup, one forking meanwhile included. Other signals go to each
// process the cgroup lists, through a pidfd and once /proc says it is still
// in the cgroup, so that a pid reused meanwhile is not signalled.
func (t *cgroupTree) signal(sig syscall.Signal) ([]int, error) {
	pids, err := t.members()
	if err != nil {
		return nil, err
	}
	if sig == syscall.SIGKILL {
		var errs []error
		for _, name := range t.dirs {
			err := os.WriteFile(filepath.Join(t.base, name, "cgroup.kill"), []byte("1"), 0)
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, fmt.Errorf("kill the companion's cgroup: %w", err))
			}
		}
		return pids, errors.Join(errs...)
	}
	var reached []int
	var errs []error
	for _, pid := range pids {
		ok, err := t.signalMember(pid, sig)
		if err != nil {
			errs = append(errs, err)
		}
		if ok {
			reached = append(reached, pid)
		}
	}
	return reached, errors.Join(errs...)
}

func (t *cgroupTree) signalMember(pid int, sig syscall.Signal) (bool, error) {
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("pidfd_open %d: %w", pid, err)
	}
	defer unix.Close(fd)
	b, err := os.ReadFile(filepath.Join(t.proc, strconv.Itoa(pid), "cgroup"))
	if err != nil || !slices.ContainsFunc(t.dirs, func(name string) bool {
		return slices.Contains(strings.Split(string(b), "\n"), "0::"+filepath.Join(t.own, name))
	}) {
		return false, nil // gone, or its pid is another's now
	}
	if err := unix.PidfdSendSignal(fd, sig, nil, 0); err != nil {
		if errors.Is(err, unix.ESRCH) {
			return false, nil
		}
		return false, fmt.Errorf("signal %d: %w", pid, err)
	}
	return true, nil
}

// close removes the cgroups; their processes were killed, and a process
// just killed may hold one for a moment.
func (t *cgroupTree) close() error {
	t.started(0)
	var errs []error
	for _, name := range t.dirs {
		dir := filepath.Join(t.base, name)
		err := os.Remove(dir)
		for i := 0; errors.Is(err, unix.EBUSY) && i < 50; i++ {
			_ = os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0)
			time.Sleep(10 * time.Millisecond)
			err = os.Remove(dir)
		}
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove the companion's cgroup: %w", err))
		}
	}
	t.dirs = nil
	return errors.Join(errs...)
}
