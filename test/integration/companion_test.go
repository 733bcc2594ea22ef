package integration

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hapsuper/hapsuper/test/harness"
)

// The companion tests run the stand-in controller (test/harness/standin/
// controller) under hapsuper's --companion as HAProxy Technologies' images
// run their controller under gopherd: it writes HAProxy's configuration and
// the aux file and reloads over the master CLI every standinInterval.

const standinInterval = 300 * time.Millisecond

// companionKillDelay is the tests' --companion-kill-delay: the fast
// budget's drain share (5.33 s) keeps more than the quiet period after it.
const companionKillDelay = time.Second

var standin struct {
	once sync.Once
	bin  string
	err  error
}

// standinBin builds the stand-in controller once per run.
func standinBin(t *testing.T) string {
	t.Helper()
	standin.once.Do(func() {
		dir, err := os.MkdirTemp("", "hapsuper-standin-")
		if err != nil {
			standin.err = err
			return
		}
		standin.bin, standin.err = harness.BuildStandinController(dir, "haproxy-ingress-controller")
	})
	if standin.err != nil {
		t.Fatalf("build the stand-in controller: %v", standin.err)
	}
	return standin.bin
}

// withCompanion is hapsuper with the stand-in controller beside HAProxy h
// and what the controller recorded.
type withCompanion struct {
	*supervisor
	cfg   haproxyConfig
	state string // the stand-in's STANDIN_DIR
}

// startWithCompanion runs hapsuper over HAProxy h (-f the configuration -f
// the aux file, given by --haproxy-command) with the stand-in controller as
// its companion, given the chart's args after --, and waits until HAProxy
// serves and the controller reloaded it once.
func startWithCompanion(t *testing.T, h haproxyVersion) *withCompanion {
	t.Helper()
	dir := t.TempDir()
	cfg := newConfig(t)
	path := cfg.write(t, dir)
	src := filepath.Join(dir, "haproxy.cfg.src")
	if err := os.Rename(path, src); err != nil {
		t.Fatal(err)
	}
	// HAProxy's first configuration, as the image ships one.
	if err := os.Link(src, path); err != nil {
		t.Fatal(err)
	}
	aux := filepath.Join(dir, "haproxy-aux.cfg")
	state := filepath.Join(dir, "standin")
	if err := os.Mkdir(state, 0o755); err != nil {
		t.Fatal(err)
	}
	args := append(fast.flags(),
		"--companion", standinBin(t),
		"--companion-kill-delay", companionKillDelay.String(),
		"--create-if-missing", aux,
		"--haproxy-command", h.command(t, dir)+" -f "+path+" -f "+aux,
		"--master-socket", filepath.Join(dir, "master.sock"),
		"--status-socket", filepath.Join(dir, "status.sock"),
		"--override-file", filepath.Join(dir, "override.cfg"),
		"--log-format", "json",
		"--", "--with-s6-overlay", "--configmap=default/haproxy-kubernetes-ingress")
	s := startCommand(t, dir, procOptions{env: []string{
		"STANDIN_MASTER_SOCKET=" + filepath.Join(dir, "master.sock"),
		"STANDIN_INTERVAL=" + standinInterval.String(),
		"STANDIN_CONFIG=" + path,
		"STANDIN_CONFIG_FROM=" + src,
		"STANDIN_AUX=" + aux,
		"STANDIN_DIR=" + state,
	}}, args)
	s.waitReady(cfg.webAddr())
	c := &withCompanion{supervisor: s, cfg: cfg, state: state}
	c.waitReloads(c.waitStarted(0), 1, 10*time.Second)
	return c
}

// waitStarted waits for the companion's start after restarts restarts and
// returns its pid.
func (c *withCompanion) waitStarted(restarts int) int {
	c.t.Helper()
	l, ok := c.Wait("companion started", func(e harness.Entry) bool {
		n, _ := e.Num("restarts")
		return int(n) == restarts
	}, 15*time.Second, nil)
	if !ok {
		c.t.Fatalf("no companion start with %d restarts", restarts)
	}
	pid, _ := l.Num("pid")
	return int(pid)
}

// standinEvent is one line of the stand-in's events file.
type standinEvent struct {
	at     time.Time
	pid    int
	what   string
	detail string
}

func (c *withCompanion) events() []standinEvent {
	c.t.Helper()
	b, err := os.ReadFile(filepath.Join(c.state, "events"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil // not started yet
	}
	if err != nil {
		c.t.Fatalf("the stand-in's events: %v", err)
	}
	var evs []standinEvent
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.SplitN(line, " ", 4)
		if len(f) < 3 {
			continue
		}
		ns, _ := strconv.ParseInt(f[0], 10, 64)
		pid, _ := strconv.Atoi(f[1])
		e := standinEvent{at: time.Unix(0, ns), pid: pid, what: f[2]}
		if len(f) == 4 {
			e.detail = f[3]
		}
		evs = append(evs, e)
	}
	return evs
}

// count counts the events what of pid (0: any).
func (c *withCompanion) count(pid int, what string) int {
	n := 0
	for _, e := range c.events() {
		if e.what == what && (pid == 0 || e.pid == pid) {
			n++
		}
	}
	return n
}

// waitReloads waits until the stand-in pid sent n reloads.
func (c *withCompanion) waitReloads(pid, n int, timeout time.Duration) {
	c.t.Helper()
	for end := time.Now().Add(timeout); c.count(pid, "reload") < n; {
		if time.Now().After(end) {
			c.t.Fatalf("the stand-in controller %d sent %d reloads in %s, want %d", pid, c.count(pid, "reload"), timeout, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// tell has the stand-in exit with code at its next tick.
func (c *withCompanion) tell(code int) time.Time {
	c.t.Helper()
	at := time.Now()
	if err := os.WriteFile(filepath.Join(c.state, "exit"), []byte(strconv.Itoa(code)), 0o644); err != nil {
		c.t.Fatal(err)
	}
	return at
}

// companionStatus is the companion as `hapsuper status --json` shows it.
type companionStatus struct {
	State    string `json:"state"`
	PID      int    `json:"pid"`
	Restarts int    `json:"restarts"`
	LastExit *int   `json:"lastExit"`
}

func (c *withCompanion) companionStatus() companionStatus {
	c.t.Helper()
	out, errs, code := c.runStatus("--json")
	if code != 0 {
		c.t.Fatalf("hapsuper status --json exited %d: %s%s", code, out, errs)
	}
	var d struct {
		Companion *companionStatus `json:"companion"`
	}
	if err := json.Unmarshal([]byte(out), &d); err != nil || d.Companion == nil {
		c.t.Fatalf("hapsuper status --json: no companion (%v): %s", err, out)
	}
	return *d.Companion
}

// TestCompanion_RestartedWhileHAProxyServes: the stand-in controller,
// given the chart's args, reloads HAProxy every few hundred ms; it exits 0
// once and is killed once, and is started again each time, while a client
// opening a connection every 20 ms sees no failure.
func TestCompanion_RestartedWhileHAProxyServes(t *testing.T) {
	eachHAProxy(t, func(t *testing.T, h haproxyVersion) {
		c := startWithCompanion(t, h)
		cont := startContinuous(t, c.cfg.webAddr(), 20*time.Millisecond, time.Minute)
		first := c.waitStarted(0)
		if evs := c.events(); !strings.Contains(evs[0].detail, "--with-s6-overlay --configmap=default/haproxy-kubernetes-ingress") {
			t.Errorf("the companion's args: %q; want the words after --", evs[0].detail)
		}
		c.waitReloads(first, 3, 10*time.Second)

		c.tell(0)
		if _, ok := c.Wait("companion exited: starting it again", func(e harness.Entry) bool { n, _ := e.Num("code"); return n == 0 }, 10*time.Second, nil); !ok {
			t.Fatal("no restart after the companion exited 0")
		}
		second := c.waitStarted(1)
		c.waitReloads(second, 3, 10*time.Second)

		if err := syscall.Kill(second, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		if _, ok := c.Wait("companion exited: starting it again", func(e harness.Entry) bool { n, _ := e.Num("code"); return n == 137 }, 10*time.Second, nil); !ok {
			t.Fatal("no restart after the companion was killed")
		}
		third := c.waitStarted(2)
		c.waitReloads(third, 3, 10*time.Second)
		if first == second || second == third {
			t.Errorf("companion pids %d, %d, %d: want a new process each start", first, second, third)
		}

		st := c.companionStatus()
		if st.State != "running" || st.Restarts != 2 || st.LastExit == nil || *st.LastExit != 137 || st.PID != third {
			t.Errorf("status companion %+v; want running, pid %d, 2 restarts, last exit 137", st, third)
		}
		cont.stop()
		checkNoFailures(t, cont.rec)
		// The stand-in's reloads landed: none refused or failed, and
		// hapsuper followed them (reloads faster than its polls may be
		// seen as one).
		for _, e := range c.events() {
			switch e.what {
			case "reload-refused":
				t.Errorf("HAProxy refused a reload of the stand-in's: %s", e.detail)
			case "reload-failed":
				// A master that re-executes (up to 3.0) refuses connections
				// to its CLI for a moment: the next tick reloads.
				t.Logf("a reload of the stand-in's was not sent: %s", e.detail)
			}
		}
		if r := c.statusJSON().Reloads; r.Failed > 0 || r.OK == 0 {
			t.Errorf("reloads %d ok, %d failed; want some ok and none failed", r.OK, r.Failed)
		}
		c.stopClean()
	})
}

// TestCompanion_DrainStopsItBeforeTheSoftStop: SIGTERM starts the drain
// while the stand-in keeps reloading; hapsuper stops it (SIGTERM to its
// group) when the drain ends, and soft-stops HAProxy once it is gone: no
// reload after the soft stop, no failed request, exit 0.
func TestCompanion_DrainStopsItBeforeTheSoftStop(t *testing.T) {
	eachHAProxy(t, func(t *testing.T, h haproxyVersion) {
		c := startWithCompanion(t, h)
		cont := startContinuous(t, c.cfg.webAddr(), 20*time.Millisecond, time.Minute)
		pid := c.waitStarted(0)
		time.Sleep(500 * time.Millisecond)
		term := c.signal(syscall.SIGTERM)
		started := c.waitLog("drain started", 5*time.Second)
		time.Sleep(3 * standinInterval)
		cont.stop()
		code, exitAt := c.waitExit(fast.exitLimit() + companionKillDelay)
		t.Logf("exit %d %s after SIGTERM", code, exitAt.Sub(term))
		c.checkClean(code)
		checkNoFailures(t, cont.rec)

		stopping, ok1 := c.Find("stopping the companion", nil)
		soft, ok2 := c.Find("soft stop", nil)
		if !ok1 || !ok2 {
			t.Fatalf(`logs "stopping the companion" %v, "soft stop" %v: want both`, ok1, ok2)
		}
		if soft.At.Before(stopping.At) {
			t.Errorf("soft stop at %s, before the companion's stop at %s", soft.At, stopping.At)
		}
		// The companion kept reloading in the drain (a loaded master answers
		// a reload only once the new worker is up: count, do not time) and
		// was told to stop only when the drain ended.
		stopped, during := false, 0
		for _, e := range c.events() {
			if e.what == "reload" && !e.at.Before(soft.At) {
				t.Errorf("the companion reloaded at %s, after the soft stop at %s", e.at.Format(time.RFC3339Nano), soft.At.Format(time.RFC3339Nano))
			}
			if e.what == "reload" && e.pid == pid && e.at.After(started.At) && e.at.Before(stopping.At) {
				during++
			}
			if e.what == "stop" && e.pid == pid && e.at.Before(stopping.At) {
				t.Errorf("the companion %d recorded its SIGTERM at %s, before hapsuper stopped it at %s", pid, e.at.Format(time.RFC3339Nano), stopping.At.Format(time.RFC3339Nano))
			}
			stopped = stopped || (e.what == "stop" && e.pid == pid && e.at.Before(soft.At))
		}
		if during == 0 {
			t.Errorf("no reload by the companion between the drain's start at %s and its stop at %s, want it reloading still", started.At.Format(time.RFC3339Nano), stopping.At.Format(time.RFC3339Nano))
		}
		t.Logf("%d reloads by the companion in the drain, %s long", during, stopping.At.Sub(started.At))
		if !stopped {
			t.Errorf("the companion %d did not record its SIGTERM before the soft stop", pid)
		}
		if err := syscall.Kill(pid, 0); err == nil {
			t.Errorf("the companion %d outlived hapsuper", pid)
		}
	})
}

// TestCompanion_ExitCodeStopsTheContainer: the stand-in exits 2; hapsuper
// soft-stops HAProxy at once (the pod is not being deleted: nothing to
// drain for) and exits 2 within the stop budget.
func TestCompanion_ExitCodeStopsTheContainer(t *testing.T) {
	eachHAProxy(t, func(t *testing.T, h haproxyVersion) {
		c := startWithCompanion(t, h)
		told := c.tell(2)
		code, exitAt := c.waitExit(fast.exitLimit() + standinInterval)
		t.Logf("exit %d %s after the companion was told to exit 2", code, exitAt.Sub(told))
		if code != 2 {
			t.Errorf("exit code %d, want the companion's 2", code)
		}
		if _, ok := c.Find("soft stop: the companion failed", nil); !ok {
			t.Error(`no "soft stop: the companion failed" log`)
		}
		if l, ok := c.Find("hard stop", nil); ok {
			t.Errorf("hard stop sent (%s): want HAProxy soft-stopped", l.Raw)
		}
		if d := exitAt.Sub(told); d > fast.deadline() {
			t.Errorf("exit %s after the companion's failure, want within the stop budget %s", d, fast.deadline())
		}
		checkNoHAProxyLeft(t, c.dir)
	})
}
