package integration

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hapsuper/hapsuper/test/harness"
)

// leakyCompanion is a companion that leaves helpers behind on each run: one
// in its own session (setsid), one plain that ignores SIGTERM (an orphan
// once the companion is gone). Each helper appends its pid to helpers; the
// first run exits 0 once both are there, the next ones stay.
const leakyCompanion = `#!/bin/sh
dir=$(dirname "$0")
n=$(cat "$dir/runs" 2>/dev/null || echo 0)
n=$((n + 1))
echo $n >"$dir/runs"
setsid sh -c 'echo $$ >>"$1/helpers"; exec sleep 987001' sh "$dir" &
sh -c 'trap "" TERM; echo $$ >>"$1/helpers"; exec sleep 987002' sh "$dir" &
while [ "$(wc -l <"$dir/helpers" 2>/dev/null || echo 0)" -lt $((n * 2)) ]; do sleep 0.05; done
[ "$n" -gt 1 ] || exit 0
exec sleep 987003
`

// readOnlyCgroup runs the command after it with every cgroup2 mount
// read-only, in a mount namespace of its own: as most pods run, where
// hapsuper must follow the companion's tree in /proc.
var readOnlyCgroup = []string{"unshare", "--mount", "--propagation", "private", "sh", "-c",
	`for m in $(grep -- ' - cgroup2 ' /proc/self/mountinfo | cut -d' ' -f5); do mount -o remount,bind,ro "$m" || exit 1; done; exec "$0" "$@"`}

// TestCompanion_TreeContained: a companion that leaves a setsid helper and
// a plain orphan when it exits, and again while it runs; hapsuper kills
// the first ones before it starts it again, and the second ones (SIGTERM,
// then SIGKILL for the one that ignores it) before the soft stop; nothing
// of the companion's is left, checked in /proc. Both ways: its own cgroup
// where cgroup v2 is writable, /proc where it is read-only.
func TestCompanion_TreeContained(t *testing.T) {
	requireRoot(t)
	t.Parallel()
	for _, way := range []string{"cgroup", "proc"} {
		t.Run(way, func(t *testing.T) {
			t.Parallel()
			var o procOptions
			if way == "proc" {
				o.prefix = readOnlyCgroup
			}
			testTreeContained(t, way, o)
		})
	}
}

func testTreeContained(t *testing.T, way string, o procOptions) {
	dir := t.TempDir()
	cfg := newConfig(t)
	comp := filepath.Join(dir, "companion.sh")
	if err := os.WriteFile(comp, []byte(leakyCompanion), 0o755); err != nil {
		t.Fatal(err)
	}
	args := append(fast.flags(),
		"--companion", comp,
		"--companion-kill-delay", companionKillDelay.String(),
		"--companion-restart-backoff", "200ms",
		"--haproxy-command", haproxyBin+" -f "+cfg.write(t, dir),
		"--master-socket", filepath.Join(dir, "master.sock"),
		"--status-socket", filepath.Join(dir, "status.sock"),
		"--override-file", filepath.Join(dir, "override.cfg"),
		"--log-format", "json")
	s := startCommand(t, dir, o, args)
	s.waitReady(cfg.webAddr())
	l := s.waitLog("companion containment", 10*time.Second)
	if got := l.Str("way"); got != way {
		if way == "cgroup" && os.Getenv("CI") != "true" {
			t.Skipf("cgroup v2 is not writable here (%s): the cgroup way is not tested", l.Str("why"))
		}
		t.Fatalf("containment %q (%s), want %q", got, l.Raw, way)
	}

	// The first run exits 0, leaving its two helpers.
	first := waitHelpers(t, dir, 2)
	if _, ok := s.Wait("companion started", func(e harness.Entry) bool { n, _ := e.Num("restarts"); return n == 1 }, 15*time.Second, nil); !ok {
		t.Fatal("the companion was not started again after it exited 0")
	}
	killed, ok := s.Find("companion's processes killed", func(e harness.Entry) bool { return e.Str("why") == "the companion exited" })
	restarted, _ := s.Find("companion started", func(e harness.Entry) bool { n, _ := e.Num("restarts"); return n == 1 })
	if !ok {
		t.Fatal(`no "companion's processes killed" when the companion exited`)
	}
	if n, _ := killed.Num("count"); int(n) != len(first) {
		t.Errorf("killed %v at the exit, want its %d helpers %v", killed.Str("pids"), len(first), first)
	}
	if restarted.At.Before(killed.At) {
		t.Errorf("started again at %s, before its helpers were killed at %s", restarted.At, killed.At)
	}
	for _, h := range first {
		if h.alive() {
			t.Errorf("helper %d of the first run alive after the companion was started again", h.pid)
		}
	}

	// The second run stays, with two more helpers; the drain stops them all
	// before the soft stop.
	second := waitHelpers(t, dir, 4)[2:]
	s.signal(syscall.SIGTERM)
	code, _ := s.waitExit(fast.exitLimit() + companionKillDelay)
	s.checkClean(code)
	stopping := s.waitLog("stopping the companion", time.Second)
	soft := s.waitLog("soft stop", time.Second)
	delay, ok := s.Find("companion's processes killed", func(e harness.Entry) bool { return e.Str("why") == "the kill delay passed" })
	if !ok {
		t.Fatalf(`no "companion's processes killed" after the kill delay: the helper that ignores SIGTERM was not killed (%s)`, stopping.Raw)
	}
	if n, _ := stopping.Num("count"); int(n) != 3 {
		t.Errorf("SIGTERM reached %s, want the companion and its 2 helpers", stopping.Str("pids"))
	}
	if soft.At.Before(delay.At) {
		t.Errorf("soft stop at %s, before the helper that ignores SIGTERM was killed at %s", soft.At, delay.At)
	}
	for _, h := range append(first, second...) {
		if h.alive() {
			t.Errorf("helper %d alive after hapsuper exited", h.pid)
		}
	}
	if z := zombiesOf(s.Pid()); len(z) > 0 {
		t.Errorf("zombies left: %v", z)
	}
	if way == "cgroup" {
		if left := companionCgroups(s.Pid()); len(left) > 0 {
			t.Errorf("the companion's cgroup is left: %v", left)
		}
	}
}

// helperProc is a helper as first read: its start time tells it from a
// later process with its pid.
type helperProc struct {
	pid   int
	start string
}

func (h helperProc) alive() bool {
	st, ok := procStart(h.pid)
	return ok && st == h.start && alive(h.pid)
}

// procStart is the process's start time (field 22 of its stat).
func procStart(pid int) (string, bool) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return "", false
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 20 {
		return "", false
	}
	return f[19], true
}

// waitHelpers waits until the companion's helpers recorded n pids and
// returns them with their start times.
func waitHelpers(t *testing.T, dir string, n int) []helperProc {
	t.Helper()
	for end := time.Now().Add(15 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		b, err := os.ReadFile(filepath.Join(dir, "helpers"))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
		lines := strings.Fields(string(b))
		if len(lines) >= n {
			var hs []helperProc
			for _, l := range lines[:n] {
				pid, err := strconv.Atoi(l)
				if err != nil {
					t.Fatalf("helpers file: %q", b)
				}
				st, _ := procStart(pid)
				hs = append(hs, helperProc{pid: pid, start: st})
			}
			return hs
		}
		if time.Now().After(end) {
			t.Fatalf("the companion's helpers recorded %d pids in 15s, want %d", len(lines), n)
		}
	}
}

// companionCgroups lists the companion cgroups of hapsuper pid left in
// the cgroup2 mounts.
func companionCgroups(pid int) []string {
	b, _ := os.ReadFile("/proc/self/mountinfo")
	var left []string
	for _, line := range strings.Split(string(b), "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		f := strings.Fields(pre)
		if !ok || len(f) < 5 || !strings.HasPrefix(post, "cgroup2 ") {
			continue
		}
		m, _ := filepath.Glob(filepath.Join(f[4], "*", fmt.Sprintf("hapsuper-companion-%d-*", pid)))
		m2, _ := filepath.Glob(filepath.Join(f[4], fmt.Sprintf("hapsuper-companion-%d-*", pid)))
		left = append(append(left, m...), m2...)
	}
	return left
}

// TestReloadAfterSoftStop: a master-CLI client sends `reload` after the
// soft stop (the old worker still finishes a slow request, so the master
// is there to take it). hapsuper sees the new worker, sends the soft stop
// again, and says so in its log and status; new connections are refused
// again soon and the master exits. hapsuper's own SIGHUP is refused then.
func TestReloadAfterSoftStop(t *testing.T) {
	eachHAProxy(t, func(t *testing.T, h haproxyVersion) {
		cfg := newConfig(t)
		s := serve(t, h, cfg, roomy.flags()...)
		slow := startSlow(t, cfg.webAddr(), 5*time.Second)
		time.Sleep(300 * time.Millisecond)
		s.signal(syscall.SIGTERM)
		soft := s.waitLog("soft stop", 10*time.Second)
		waitRefused(t, cfg.webAddr(), 10*time.Second)
		out, err := masterCommand(s.master, "reload")
		t.Logf("reload on the master CLI %s after the soft stop: %q %v", time.Since(soft.At), strings.TrimSpace(out), err)
		if err != nil {
			t.Fatalf("reload on the master CLI: %v", err)
		}
		l, ok := s.Wait("reload after the soft stop: a new worker listens again; soft stop sent again", nil, 10*time.Second, nil)
		if !ok {
			t.Fatal("hapsuper did not see the worker the reload started after the soft stop")
		}
		if w, _ := l.Num("worker"); w == 0 || !strings.Contains(l.Str("by"), "unknown") {
			t.Errorf("record %s: want the new worker and an unknown client", l.Raw)
		}
		s.signal(syscall.SIGHUP)
		if _, ok := s.Wait("reload refused: HAProxy was soft-stopped, a reload would open its listeners again", nil, 5*time.Second, nil); !ok {
			t.Error("hapsuper's own reload (SIGHUP) was not refused after the soft stop")
		}
		st := s.statusJSON()
		if st.Drain == nil || len(st.Drain.ReloadsAfterSoftStop) == 0 {
			t.Errorf("status shows no reload after the soft stop: %+v", st.Drain)
		}
		refused, accepted := waitRefused(t, cfg.webAddr(), 10*time.Second)
		t.Logf("new connections refused again %s after hapsuper saw the new worker (%d accepted meanwhile)", refused.Sub(l.At), accepted)
		slow.wait(10 * time.Second)
		code, _ := s.waitExit(10 * time.Second)
		s.checkClean(code)
		checkNoHAProxyLeft(t, s.dir)
	})
}

// waitRefused waits until a connection to addr is refused, at most
// timeout, and returns when, and how many it opened before.
func waitRefused(t *testing.T, addr string, timeout time.Duration) (time.Time, int) {
	t.Helper()
	for n, end := 0, time.Now().Add(timeout); ; time.Sleep(20 * time.Millisecond) {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return time.Now(), n
		}
		c.Close()
		n++
		if time.Now().After(end) {
			t.Fatalf("%s still accepts connections %s on", addr, timeout)
		}
	}
}

// quitter is a companion that says why and exits 0 at once, every time.
const quitter = `#!/bin/sh
echo "E0101 cannot reach the API server: connection refused"
exit 0
`

// TestCompanion_QuickExitsBackOff: a companion that exits 0 at once again
// and again is started again after each logged delay, no earlier, with a
// delay that doubles; status says it is failing and shows its last line.
func TestCompanion_QuickExitsBackOff(t *testing.T) {
	requireRoot(t)
	t.Parallel()
	dir := t.TempDir()
	cfg := newConfig(t)
	comp := filepath.Join(dir, "companion.sh")
	if err := os.WriteFile(comp, []byte(quitter), 0o755); err != nil {
		t.Fatal(err)
	}
	args := append(fast.flags(),
		"--companion", comp,
		"--companion-kill-delay", companionKillDelay.String(),
		"--companion-restart-backoff", "100ms",
		"--companion-restart-backoff-max", "4s",
		"--haproxy-command", haproxyBin+" -f "+cfg.write(t, dir),
		"--master-socket", filepath.Join(dir, "master.sock"),
		"--status-socket", filepath.Join(dir, "status.sock"),
		"--override-file", filepath.Join(dir, "override.cfg"),
		"--log-format", "json")
	s := startCommand(t, dir, procOptions{}, args)
	s.waitReady(cfg.webAddr())
	const restarts = 5
	if _, ok := s.Wait("companion started", func(e harness.Entry) bool { n, _ := e.Num("restarts"); return n == restarts }, 20*time.Second, nil); !ok {
		t.Fatalf("no %d restarts in 20s", restarts)
	}
	var doc struct {
		Companion struct {
			State   string   `json:"state"`
			Failing string   `json:"failing"`
			Output  []string `json:"output"`
		} `json:"companion"`
	}
	out, errs, code := s.runStatus("--json")
	if code != 0 || json.Unmarshal([]byte(out), &doc) != nil {
		t.Fatalf("hapsuper status --json exited %d: %s%s", code, out, errs)
	}
	if !strings.Contains(doc.Companion.Failing, "quick exits in a row") ||
		!slices.ContainsFunc(doc.Companion.Output, func(l string) bool { return strings.Contains(l, "cannot reach the API server") }) {
		t.Errorf("status companion %+v: want it failing, with its last output line", doc.Companion)
	}
	text, _, _ := s.runStatus()
	t.Logf("hapsuper status:\n%s", text)

	exits, starts := s.All("companion exited: starting it again"), s.All("companion started")
	var prev time.Duration
	for i := 0; i < restarts; i++ {
		delay, err := time.ParseDuration(exits[i].Str("in"))
		if err != nil {
			t.Fatalf("exit %d: delay %q", i, exits[i].Str("in"))
		}
		gap := starts[i+1].At.Sub(exits[i].At)
		t.Logf("restart %d: delay %s, started %s after the exit (%s late)", i+1, delay, gap.Round(time.Millisecond), (gap - delay).Round(time.Millisecond))
		if gap < delay-time.Millisecond { // the log's times are to the µs
			t.Errorf("restart %d %s after the exit, before its delay %s", i+1, gap, delay)
		}
		if i > 0 && delay != 2*prev {
			t.Errorf("restart %d after %s, the one before after %s: want it doubled", i+1, delay, prev)
		}
		prev = delay
	}
	s.signal(syscall.SIGTERM)
	code, _ = s.waitExit(fast.exitLimit() + companionKillDelay)
	s.checkClean(code)
}
