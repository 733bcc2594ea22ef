package image_test

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hapsuper/hapsuper/conf"
	"github.com/hapsuper/hapsuper/test/harness"
)

// imageConfigPath is the configuration path of the image's CMD.
const imageConfigPath = "/usr/local/etc/haproxy/haproxy.cfg"

// TestImageCommandLine runs the image's ENTRYPOINT + CMD, as parsed from the
// Dockerfile, against this machine's HAProxy: the image's binary path maps
// to a fresh build, its config path to an example config, its run directory
// to a temporary one made by the Dockerfile's own RUN, and it runs as the
// haproxy user as the image does. It must serve, then drain on the image's
// STOPSIGNAL and exit 0.
func TestImageCommandLine(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: it creates the run directory for, and runs hapsuper as, the haproxy user")
	}
	u, err := user.Lookup("haproxy")
	if err != nil {
		t.Skipf("no haproxy user on this machine (Debian's haproxy package creates it): %v", err)
	}
	if _, err := exec.LookPath("haproxy"); err != nil {
		t.Skipf("no haproxy binary in PATH: %v", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	img := loadImage(t)

	dir, err := os.MkdirTemp("", "hapsuper-image-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil { // the image's / : root's, readable by all
		t.Fatal(err)
	}
	bin, err := harness.Build(dir) // as the Dockerfile builds it
	if err != nil {
		t.Fatal(err)
	}

	// The run directory, made by the Dockerfile's RUN with its path mapped.
	run := mapRunDir(t, img, filepath.Join(dir, "var", "run"))
	info, err := os.Stat(run)
	if err != nil {
		t.Fatal(err)
	}
	st := info.Sys().(*syscall.Stat_t)
	if !info.IsDir() || info.Mode().Perm() != 0o700 || int(st.Uid) != uid || int(st.Gid) != gid {
		t.Fatalf("run directory %s: mode %v owner %d:%d, want a directory 0700 owned by haproxy (%d:%d)", run, info.Mode(), st.Uid, st.Gid, uid, gid)
	}

	cfg := filepath.Join(dir, "haproxy.cfg")
	port := writeExampleConfig(t, cfg)
	argv := imageArgv(t, img, bin, cfg)
	defaults, err := conf.Parse(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	env := append([]string{
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		conf.EnvName("master-socket") + "=" + filepath.Join(run, filepath.Base(defaults.MasterSocket)),
		conf.EnvName("status-socket") + "=" + filepath.Join(run, filepath.Base(defaults.StatusSocket)),
		conf.EnvName("override-file") + "=" + filepath.Join(run, filepath.Base(defaults.OverrideFile)),
	}, drainEnv...)
	t.Logf("running %q as haproxy (%d:%d) with %q", argv, uid, gid, env)
	p := startIn(t, "", "/", argv, env, uid, gid)
	p.ready(t, uid)
	p.serveAndDrain(t, port, img.stopSignal)
}

// drainEnv are the settings both runs of the image's command add: a drain
// short enough for a test, and a log the test reads.
var drainEnv = []string{
	conf.EnvName("grace-period") + "=10s",
	conf.EnvName("quiet-period") + "=1s",
	conf.EnvName("log-format") + "=json",
}

// ready waits until HAProxy serves and checks that its master runs as uid;
// it returns the master's pid.
func (p *process) ready(t *testing.T, uid int) int {
	t.Helper()
	started := p.waitLog(t, "haproxy started", 10*time.Second)
	ready := p.waitLog(t, "haproxy ready", 10*time.Second)
	master := int(started["pid"].(float64))
	if got := procUID(t, master); got != uid {
		t.Errorf("HAProxy master %d runs as uid %d, want the image's user's %d", master, got, uid)
	}
	t.Logf("ready via %v", ready["via"])
	return master
}

// serveAndDrain checks what the image's command must do once ready: serve
// on port, drain on the image's stop signal with its listeners open, end
// the drain quiet and exit 0.
func (p *process) serveAndDrain(t *testing.T, port int, stopSignal string) {
	t.Helper()
	url := fmt.Sprintf("http://127.0.0.1:%d/", port)
	if code := httpGet(t, url); code != http.StatusOK {
		t.Fatalf("GET %s: %d, want 200", url, code)
	}
	sig, err := conf.ParseSignal(stopSignal)
	if err != nil {
		t.Fatalf("image stop signal %q: %v", stopSignal, err)
	}
	stopAt := time.Now()
	if err := p.Signal(sig); err != nil {
		t.Fatal(err)
	}
	drain := p.waitLog(t, "drain started", 2*time.Second)
	if drain["signal"] != conf.SignalName(sig) {
		t.Errorf("drain started by %v, want %s", drain["signal"], conf.SignalName(sig))
	}
	if code := httpGet(t, url); code != http.StatusOK { // listeners stay open while draining
		t.Errorf("GET %s while draining: %d, want 200", url, code)
	}
	ended := p.waitLog(t, "drain ended", 8*time.Second)
	if ended["reason"] != "quiet" {
		t.Errorf("drain ended with reason %v (%v), want quiet", ended["reason"], ended["detail"])
	}
	// With no client left, the soft stop ends at once: the budget after the
	// drain is the rest of the grace period, a second is plenty.
	select {
	case <-p.Done():
	case <-time.After(2 * time.Second):
		t.Fatal("hapsuper did not exit within 2s")
	}
	code, _ := p.Exit()
	t.Logf("%s at +0, drain ended after %.2fs (%v), exit %d at +%s", sig, ended["duration_s"], ended["reason"], code, time.Since(stopAt).Round(time.Millisecond))
	if code != 0 {
		t.Errorf("hapsuper exited %d after a clean drain, want 0", code)
	}
}

const exampleConfig = `global
    log stderr format raw local0 notice

defaults
    mode http
    timeout connect 1s
    timeout client 5s
    timeout server 5s
    option idle-close-on-response

frontend web
    bind 127.0.0.1:%d
    http-request return status 200 content-type text/plain string "served by the image's command line\n"
`

// imageArgv is ENTRYPOINT + CMD with the image's paths mapped: the binary
// to bin, the configuration to cfg. Nothing else is changed.
func imageArgv(t *testing.T, img image, bin, cfg string) []string {
	t.Helper()
	argv := slices.Concat(img.entrypoint, img.cmd)
	if argv[0] != binaryPath {
		t.Fatalf("image command %q does not start with %s", argv, binaryPath)
	}
	argv[0] = bin
	i := slices.Index(argv, imageConfigPath)
	if i < 0 {
		t.Fatalf("image command %q does not load %s", argv, imageConfigPath)
	}
	argv[i] = cfg
	return argv
}

// mapRunDir runs the Dockerfile's RUN that makes the run directory with
// /var/run mapped to varRun, as root as the Dockerfile does, and returns the
// directory it made.
func mapRunDir(t *testing.T, img image, varRun string) string {
	t.Helper()
	r := runDirCommand(t, img)
	dir := runDir(t)
	if !strings.HasPrefix(dir, "/var/run/") {
		t.Fatalf("run directory %s is not under /var/run", dir)
	}
	if err := os.MkdirAll(varRun, 0o755); err != nil {
		t.Fatal(err)
	}
	mapped := filepath.Join(varRun, strings.TrimPrefix(dir, "/var/run/"))
	command := strings.ReplaceAll(r.command, dir, mapped)
	if out, err := exec.Command("/bin/sh", "-c", command).CombinedOutput(); err != nil {
		t.Fatalf("RUN %s: %v\n%s", command, err, out)
	}
	return mapped
}

// process is hapsuper started by the test, its output in a harness.Log.
type process struct {
	*harness.Process
}

// startIn runs argv as uid:gid in the working directory dir, chrooted into
// root unless root is empty.
func startIn(t *testing.T, root, dir string, argv, env []string, uid, gid int) *process {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: root, Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, Setpgid: true}
	hp, err := harness.Start(cmd)
	if err != nil {
		t.Fatalf("%q: %v", argv, err)
	}
	p := &process{hp}
	t.Cleanup(func() {
		p.kill(t)
		t.Logf("hapsuper's output:\n%s", p.Tail(100))
	})
	return p
}

// waitLog returns the first log line with message msg, failing after within.
func (p *process) waitLog(t *testing.T, msg string, within time.Duration) map[string]any {
	t.Helper()
	l, ok := p.Wait(msg, nil, within, p.Done())
	if !ok {
		code, _ := p.Exit()
		t.Fatalf("hapsuper did not log %q within %s (exited: %v, code %d)", msg, within, p.Exited(), code)
	}
	return l.Fields
}

// kill ends what the test left running: SIGINT asks hapsuper for a hard
// stop of HAProxy; after two seconds hapsuper and its group are killed.
func (p *process) kill(t *testing.T) {
	if p.Exited() {
		return
	}
	p.Signal(syscall.SIGINT)
	select {
	case <-p.Done():
		return
	case <-time.After(2 * time.Second):
	}
	t.Logf("hapsuper still running 2s after SIGINT: killing it")
	syscall.Kill(-p.Pid(), syscall.SIGKILL)
	select {
	case <-p.Done():
	case <-time.After(2 * time.Second):
		t.Errorf("hapsuper %d not reaped 2s after SIGKILL", p.Pid())
	}
}

func procUID(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[0] == "Uid:" {
			n, _ := strconv.Atoi(f[1])
			return n
		}
	}
	t.Fatalf("no Uid line in /proc/%d/status", pid)
	return -1
}

// writeExampleConfig writes exampleConfig on a free port to path and
// returns the port.
func writeExampleConfig(t *testing.T, path string) int {
	t.Helper()
	port, err := harness.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, fmt.Appendf(nil, exampleConfig, port), 0o644); err != nil {
		t.Fatal(err)
	}
	return port
}

func httpGet(t *testing.T, url string) int {
	t.Helper()
	// No keep-alive: an idle connection would hold the soft stop for
	// timeout client under option idle-close-on-response.
	c := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}
