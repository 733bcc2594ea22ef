package image_test

import (
	"archive/tar"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hapsuper/hapsuper/conf"
)

// Each drop-in image, run as a kubelet runs it with its chart's args
// (chrooted into its layers, as the image's user, a 2 GiB cgroup v2 memory
// limit visible at /sys/fs/cgroup): the stand-in controller gets the mode
// flag and the chart's args; HAProxy runs through the wrapper with
// gopherd.yml's command line, -m 66 % of the limit and, for
// kubernetes-ingress, the aux file hapsuper created; the controller has
// GOMEMLIMIT at 33 %; its reload over the master socket lands; `gopherd`
// in the image (`signal haproxy SIGUSR2`, `haproxy restart`) reloads
// through hapsuper; SIGTERM drains and hapsuper exits 0.
func TestBuiltHAProxyTechImagesRun(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: it unpacks the image with its owners and chroots into it")
	}
	for i, di := range dropIns {
		gopherdArgs := [][]string{{"signal", "haproxy", "SIGUSR2"}, {"haproxy", "restart"}}[i%2]
		t.Run(filepath.Base(filepath.Dir(di.path)), func(t *testing.T) {
			runBuiltDropIn(t, di, gopherdArgs)
		})
	}
}

func runBuiltDropIn(t *testing.T, di dropIn, gopherdArgs []string) {
	img := loadDropInArchive(t, di)
	root, err := os.MkdirTemp("", "hapsuper-haproxytech-root-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	forEachEntry(t, img, func(h *tar.Header, tr *tar.Reader) error { return extractEntry(h, tr, root) })
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	aux := di.createdAux
	if _, err := os.Stat(filepath.Join(root, aux)); aux != "" && err == nil {
		t.Fatalf("the image holds %s: the test must see hapsuper create it", aux)
	}
	// What the controller would write, and what HAProxy starts with: the
	// example configuration on a free port (the image's binds :8080).
	cfg := di.configs[0]
	port := writeExampleConfig(t, filepath.Join(root, cfg))
	cfgFrom := filepath.Join(root, "standin.cfg")
	b, err := os.ReadFile(filepath.Join(root, cfg))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfgFrom, b, 0o644); err != nil {
		t.Fatal(err)
	}
	cgroup := filepath.Join(root, "sys/fs/cgroup")
	if err := os.MkdirAll(cgroup, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, v := range map[string]string{"cgroup.controllers": "cpu memory pids\n", "memory.max": "2147483648\n"} {
		if err := os.WriteFile(filepath.Join(cgroup, name), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	standinDir := filepath.Join(root, "standin")
	if err := os.Mkdir(standinDir, 0o755); err != nil {
		t.Fatal(err)
	}
	passwd, err := os.ReadFile(filepath.Join(root, "etc/passwd"))
	if err != nil {
		t.Fatal(err)
	}
	uid, gid := passwdIDs(passwd, img.Config.User)
	if uid < 0 {
		t.Fatalf("no user %q in the image's /etc/passwd", img.Config.User)
	}
	for _, p := range []string{standinDir, filepath.Join(root, cfg)} {
		if err := os.Chown(p, uid, gid); err != nil { // the controller writes them
			t.Fatal(err)
		}
	}

	c := img.Config
	argv := slices.Concat(c.Entrypoint, c.Cmd, di.chartArgs)
	env := slices.Concat(c.Env, drainEnv, []string{
		"HAPSUPER_ROUTING=off",
		// The drain's bound is max-wait less the companion's kill delay
		// (gopherd's 4 s by default): 1 s leaves the 1 s quiet period room
		// in drainEnv's 10 s grace period. One reload, at the controller's
		// start: each reload blinds the counter reads for a moment, which
		// restarts the quiet period.
		conf.EnvName("companion-kill-delay") + "=1s",
		"STANDIN_INTERVAL=1m",
		"STANDIN_DIR=/standin",
		"STANDIN_CONFIG=" + cfg,
		"STANDIN_CONFIG_FROM=/standin.cfg",
	})
	if aux != "" {
		env = append(env, "STANDIN_AUX="+aux)
	}
	t.Logf("running %q chrooted into the image (%s) as %s (%d:%d)", argv, root, img.Config.User, uid, gid)
	p := startIn(t, root, "/", argv, env, uid, gid)
	master := p.ready(t, uid)
	if _, ok := p.Find("created empty file", nil); aux != "" && !ok {
		t.Errorf(`no "created empty file" log for %s`, aux)
	}

	cmdline := procStrings(t, master, "cmdline")
	t.Logf("HAProxy master: %q", cmdline)
	for _, want := range [][]string{
		{"-m", "1351"},
		{"-S", "/var/run/haproxy-master.sock,level,admin"},
		{"-f", di.configs[0], "-f", di.configs[1]},
	} {
		if !containsRun(cmdline, want) {
			t.Errorf("HAProxy master's command line %q lacks %q", cmdline, want)
		}
	}
	if !slices.Contains(procStrings(t, master, "environ"), "HAPROXY_WRAPPED=1") {
		t.Errorf("HAProxy master %d did not start through haproxy_wrapper (no HAPROXY_WRAPPED=1 in its environment)", master)
	}

	start := standinEvent(t, standinDir, "start", 10*time.Second)
	if want := strings.Join(append([]string{di.modeFlag}, di.chartArgs...), " "); start != want {
		t.Errorf("the controller started with %q, want the mode flag and the chart's args %q", start, want)
	}
	standinEvent(t, standinDir, "reload", 10*time.Second)
	if pid, err := os.ReadFile(filepath.Join(standinDir, "pid")); err != nil {
		t.Error(err)
	} else if n, err := strconv.Atoi(strings.TrimSpace(string(pid))); err != nil || !slices.Contains(procStrings(t, n, "environ"), "GOMEMLIMIT=675MiB") {
		t.Errorf("the controller (pid %q) has no GOMEMLIMIT=675MiB, 33 %% of the 2 GiB limit (%v)", pid, err)
	}
	if _, ok := p.Wait("haproxy reloaded", nil, 10*time.Second, p.Done()); !ok {
		t.Errorf("no controller reload logged by hapsuper as landed")
	}

	gopherd := exec.Command(filepath.Join(di.gopherdDir, "gopherd"), gopherdArgs...)
	gopherd.Env = env
	gopherd.SysProcAttr = &syscall.SysProcAttr{Chroot: root, Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	var out bytes.Buffer
	gopherd.Stdout, gopherd.Stderr = &out, &out
	if err := gopherd.Run(); err != nil {
		t.Errorf("gopherd %s in the image: %v: %s", strings.Join(gopherdArgs, " "), err, out.String())
	} else {
		t.Logf("gopherd: %s", strings.TrimSpace(out.String()))
	}

	p.serveAndDrain(t, port, c.StopSignal)
}

// procStrings returns /proc/<pid>/<name> split at NULs (cmdline, environ).
func procStrings(t *testing.T, pid int, name string) []string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, name))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
}

// standinEvent waits for the stand-in controller's first event what in
// dir/events and returns its detail.
func standinEvent(t *testing.T, dir, what string, within time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		b, _ := os.ReadFile(filepath.Join(dir, "events"))
		for line := range strings.SplitSeq(string(b), "\n") {
			f := strings.SplitN(line, " ", 4) // <ns> <pid> <event> [detail]
			if len(f) >= 3 && f[2] == what {
				if len(f) == 4 {
					return f[3]
				}
				return ""
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the stand-in controller logged no %q event within %s: %q", what, within, b)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
