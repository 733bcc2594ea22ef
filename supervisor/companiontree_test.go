package supervisor

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A companion that exits leaves its helpers behind: they are SIGKILLed at
// once, and it is started again only once they are gone.
func TestCompanionHelpersKilledAtItsExit(t *testing.T) {
	sc, f := companionScenario(t)
	f.helper(601) // a setsid helper, or an orphan hapsuper adopted
	f.stubborn = true
	sc.companionExit(sec(2), 501, 0)
	f.want(t, "start-501@0s", "SIGKILL-601@2s")
	sc.tick(sec(2.5)) // its backoff is over, its helper is not gone
	f.want(t, "start-501@0s", "SIGKILL-601@2s")
	if st := sc.l.board.Load().Companion; st.State != companionBackoff {
		t.Errorf("companion %s while its helper lives, want backoff", st.State)
	}
	f.gone(601)
	sc.tick(sec(2.6))
	f.want(t, "start-501@0s", "SIGKILL-601@2s", "start-502@2.6s")
	sc.wantSent()
}

// A helper that outlives SIGKILL (a process stuck in the kernel) holds the
// restart for companionReapGrace at most, logged.
func TestCompanionRestartedWhenHelpersOutliveTheGrace(t *testing.T) {
	sc, f := companionScenario(t)
	f.helper(601)
	f.stubborn = true
	sc.companionExit(sec(2), 501, 0)
	sc.tick(sec(2.9))
	f.want(t, "start-501@0s", "SIGKILL-601@2s")
	sc.tick(sec(3))
	f.want(t, "start-501@0s", "SIGKILL-601@2s", "start-502@3s")
}

// The drain's end sends SIGTERM to the companion's whole tree; a helper
// that outlives the companion holds the soft stop until the kill delay's
// SIGKILL ends it.
func TestCompanionTreeStoppedBeforeTheSoftStop(t *testing.T) {
	sc, f := companionScenario(t)
	f.helper(601)
	sc.signal(sec(1), syscall.SIGTERM)
	sc.poll(sec(1.1), worker{pid: 100})
	sc.poll(sec(3.2), worker{pid: 100}) // quiet: the drain ends
	f.want(t, "start-501@0s", "SIGTERM-501+601@3.2s")
	sc.companionExit(sec(3.3), 501, 0)
	sc.tick(sec(4.1))
	sc.wantSent() // its helper ignores SIGTERM
	sc.tick(sec(4.2))
	f.want(t, "start-501@0s", "SIGTERM-501+601@3.2s", "SIGKILL-601@4.2s")
	sc.wantSent("SIGUSR1@4.2s") // reaped at once
	if st := sc.l.board.Load().Companion; st.State != companionStopped {
		t.Errorf("companion %s, want stopped", st.State)
	}
}

// A companion that fails: its helpers are SIGKILLed and reaped before the
// soft stop it causes.
func TestCompanionFailureKillsItsTreeFirst(t *testing.T) {
	sc, f := companionScenario(t)
	f.helper(601)
	f.stubborn = true
	sc.companionExit(sec(2), 501, 2)
	f.want(t, "start-501@0s", "SIGKILL-601@2s")
	sc.wantSent()
	f.gone(601)
	sc.tick(sec(2.1))
	sc.wantSent("SIGUSR1@2.1s")
	sc.exit(sec(3), 0)
	if sc.l.exitCode != 2 {
		t.Errorf("exit code %d, want the companion's 2", sc.l.exitCode)
	}
}

// The loop wakes at the companion's next start, not at its next tick:
// nextWake says when.
func TestCompanionNextWake(t *testing.T) {
	sc, f := companionScenario(t)
	sc.companionExit(sec(2), 501, 0)
	if got := sc.l.nextWake(); !got.Equal(t0.Add(sec(2.5))) {
		t.Errorf("next wake %v, want the next start at 2.5s", got.Sub(t0))
	}
	f.helper(601)
	f.stubborn = true
	sc.tick(sec(2.5))
	f.want(t, "start-501@0s", "start-502@2.5s")
	sc.signal(sec(3), syscall.SIGTERM)
	sc.poll(sec(3.1), worker{pid: 100})
	sc.poll(sec(5.2), worker{pid: 100})
	if got := sc.l.nextWake(); !got.Equal(t0.Add(sec(5.2) + wakeClearing)) {
		t.Errorf("next wake %v while the tree is cleared, want %v", got.Sub(t0), sec(5.2)+wakeClearing)
	}
}

func TestParseStat(t *testing.T) {
	b := []byte("4242 (a (b) c) S 17 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 98765 1000 50\n")
	st, err := parseStat(b)
	if err != nil {
		t.Fatal(err)
	}
	if st != (procStat{pid: 4242, ppid: 17, pgid: 4242, state: 'S', start: 98765}) {
		t.Errorf("parsed %+v", st)
	}
	if _, err := parseStat([]byte("12 (x) S 1")); err == nil {
		t.Error("a short stat parsed without error")
	}
}

// fakeProc writes /proc/<pid>/stat files under a directory.
func fakeProc(t *testing.T, dir string, procs ...procStat) {
	t.Helper()
	for _, p := range procs {
		d := filepath.Join(dir, strconv.Itoa(p.pid))
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		line := fmt.Sprintf("%d (p) %c %d %d %d 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 %d 0 0\n", p.pid, p.state, p.ppid, p.pgid, p.pgid, p.start)
		if err := os.WriteFile(filepath.Join(d, "stat"), []byte(line), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// The /proc way: the companion, its descendants (in their own session or
// not), the orphans hapsuper adopted that are not HAProxy's; a process that
// left the tree's ancestry stays in it by (pid, start time), and a later
// process with its pid is not taken for it.
func TestProcTreeMembers(t *testing.T) {
	dir := t.TempDir()
	const self, master = 1, 10
	other := func(pid, pgid int) bool { return pid == master || pgid == master }
	fakeProc(t, dir,
		procStat{pid: self, ppid: 0, pgid: 1, state: 'S', start: 1},
		procStat{pid: master, ppid: self, pgid: master, state: 'S', start: 2},
		procStat{pid: 11, ppid: master, pgid: master, state: 'S', start: 3}, // a worker
		procStat{pid: 12, ppid: self, pgid: master, state: 'S', start: 3},   // a worker its master left
		procStat{pid: 20, ppid: self, pgid: 20, state: 'S', start: 4},       // the companion
		procStat{pid: 21, ppid: 20, pgid: 20, state: 'S', start: 5},         // its child
		procStat{pid: 22, ppid: 21, pgid: 22, state: 'S', start: 6},         // a setsid grandchild
		procStat{pid: 30, ppid: self, pgid: 25, state: 'Z', start: 7},       // an orphan of its, exited
		procStat{pid: 40, ppid: 99, pgid: 40, state: 'S', start: 8},         // elsewhere
	)
	tr := newProcTree(dir, self, other)
	tr.started(20)
	got, err := tr.members()
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{20, 21, 22, 30}; !slices.Equal(got, want) {
		t.Fatalf("members %v, want %v", got, want)
	}
	// 22 is reparented out of hapsuper's descendants (no subreaper): still
	// the tree's. 21 exited and its pid went to a stranger.
	os.RemoveAll(filepath.Join(dir, "22"))
	os.RemoveAll(filepath.Join(dir, "21"))
	os.RemoveAll(filepath.Join(dir, "30"))
	fakeProc(t, dir,
		procStat{pid: 22, ppid: 99, pgid: 22, state: 'S', start: 6},
		procStat{pid: 21, ppid: 99, pgid: 21, state: 'S', start: 50},
	)
	if got, _ = tr.members(); !slices.Equal(got, []int{20, 22}) {
		t.Errorf("members %v after 22 moved and 21's pid was reused, want [20 22]", got)
	}
}

// The /proc way for real: a companion that starts a helper in its own
// session and a plain one; SIGKILL reaches all three, and nothing else.
func TestProcTreeSignalsRealProcesses(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh:", err)
	}
	setsid, err := exec.LookPath("setsid")
	if err != nil {
		t.Skip("no setsid:", err)
	}
	cmd := exec.Command(sh, "-c", setsid+" sleep 300 & sleep 300 & wait")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	comp := cmd.Process.Pid
	tr := newProcTree(procRoot, os.Getpid(), func(pid, _ int) bool { return pid != comp })
	tr.started(comp)
	var members []int
	for end := time.Now().Add(10 * time.Second); len(members) < 3; {
		if time.Now().After(end) {
			t.Fatalf("members %v 10s after the start, want the companion and its 2 helpers", members)
		}
		time.Sleep(20 * time.Millisecond)
		if members, err = tr.members(); err != nil {
			t.Fatal(err)
		}
	}
	var sids []int
	for _, pid := range members {
		sid, _ := unixGetsid(pid)
		sids = append(sids, sid)
	}
	if !slices.ContainsFunc(sids, func(s int) bool { return s != sids[0] }) {
		t.Errorf("sessions %v of %v: want a helper in its own", sids, members)
	}
	reached, err := tr.signal(syscall.SIGKILL)
	if err != nil || !slices.Equal(reached, members) {
		t.Fatalf("SIGKILL reached %v (%v), want %v", reached, err, members)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the companion not reaped 10s after SIGKILL")
	}
	for _, pid := range members {
		if pid == comp {
			continue
		}
		for end := time.Now().Add(10 * time.Second); alive(pid); {
			if time.Now().After(end) {
				t.Fatalf("helper %d alive 10s after SIGKILL", pid)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// alive reports whether pid runs (an unreaped zombie does not).
func alive(pid int) bool {
	b, err := os.ReadFile(filepath.Join(procRoot, strconv.Itoa(pid), "stat"))
	if errors.Is(err, fs.ErrNotExist) {
		return false
	}
	st, err := parseStat(b)
	return err == nil && st.state != 'Z'
}

func unixGetsid(pid int) (int, error) {
	b, err := os.ReadFile(filepath.Join(procRoot, strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return strconv.Atoi(f[3])
}

// ownCgroup finds hapsuper's cgroup under a cgroup2 mount, and refuses a
// read-only one.
func TestOwnCgroup(t *testing.T) {
	for _, tc := range []struct {
		name, cgroup, mountinfo, mount, own, err string
	}{
		{name: "container", cgroup: "0::/\n",
			mountinfo: "30 25 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw\n", mount: "/sys/fs/cgroup", own: "/"},
		{name: "hybrid", cgroup: "4:memory:/x\n0::/a/b\n",
			mountinfo: "30 25 0:26 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n31 25 0:27 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n", mount: "/sys/fs/cgroup/unified", own: "/a/b"},
		{name: "read-only", cgroup: "0::/\n",
			mountinfo: "30 25 0:26 / /sys/fs/cgroup ro,nosuid - cgroup2 cgroup2 rw\n", err: "read-only"},
		{name: "v1 only", cgroup: "4:memory:/x\n",
			mountinfo: "31 25 0:27 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n", err: "no cgroup v2"},
		{name: "other root", cgroup: "0::/a\n",
			mountinfo: "30 25 0:26 /b /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n", err: "no cgroup v2 mount"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			os.MkdirAll(filepath.Join(dir, "self"), 0o755)
			os.WriteFile(filepath.Join(dir, "self", "cgroup"), []byte(tc.cgroup), 0o644)
			os.WriteFile(filepath.Join(dir, "self", "mountinfo"), []byte(tc.mountinfo), 0o644)
			mount, own, err := ownCgroup(dir)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Errorf("err %v, want one saying %q", err, tc.err)
				}
				return
			}
			if err != nil || mount != tc.mount || own != tc.own {
				t.Errorf("ownCgroup %q %q %v, want %q %q", mount, own, err, tc.mount, tc.own)
			}
		})
	}
}

// Where /proc cannot be read (a chroot without it), the tree is the
// companion's process group: signal reaches its members, and members is
// empty once they are gone.
func TestGroupTree_SignalsTheGroup(t *testing.T) {
	cmd := exec.Command("sh", "-c", "sleep 60 & sleep 60")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start a group: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	tree := &groupTree{}
	tree.started(cmd.Process.Pid)
	if m, err := tree.members(); err != nil || len(m) != 1 {
		t.Fatalf("members of a live group = %v, %v; want the leader", m, err)
	}
	if reached, err := tree.signal(syscall.SIGKILL); err != nil || len(reached) != 1 {
		t.Fatalf("signal = %v, %v; want the group reached", reached, err)
	}
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the group's leader did not exit after SIGKILL to the group")
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		m, err := tree.members()
		if err != nil {
			t.Fatalf("members: %v", err)
		}
		if len(m) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the group still has members 30s after SIGKILL: %v", m)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
