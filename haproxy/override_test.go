package haproxy

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hapsuper/hapsuper/conf"
)

func TestWriteOverride(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run", "hapsuper")
	s, err := conf.Parse([]string{"--grace-period", "45s", "--margin", "3s", "--override-file", filepath.Join(dir, "override.cfg")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // the second write replaces the first
		if err := WriteOverride(s); err != nil {
			t.Fatalf("WriteOverride: %v", err)
		}
	}
	got, err := os.ReadFile(s.OverrideFile)
	if err != nil {
		t.Fatal(err)
	}
	want := "# written by hapsuper: bounds every soft stop (drain, reload leftovers) within the grace budget\n" +
		"global\n    hard-stop-after 42000ms\n"
	if string(got) != want {
		t.Errorf("override file =\n%s\nwant\n%s", got, want)
	}
	if info, err := os.Stat(dir); err != nil || info.Mode().Perm() != 0o700 {
		t.Errorf("override directory: %v, %v; want mode 0700", info.Mode(), err)
	}
	if info, err := os.Stat(s.OverrideFile); err != nil || info.Mode().Perm() != 0o644 {
		t.Errorf("override file: %v, %v; want mode 0644", info.Mode(), err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("override directory holds %d entries, want only the override file", len(entries))
	}
}

func TestWriteOverrideError(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	writeFiles(t, filepath.Dir(file), map[string]string{"file": ""})
	s := conf.Settings{GracePeriod: 30 * time.Second, Margin: 2 * time.Second, OverrideFile: filepath.Join(file, "override.cfg")}
	err := WriteOverride(s)
	if err == nil || !strings.Contains(err.Error(), "--override-file") {
		t.Errorf("WriteOverride under a regular file: %v, want an error suggesting --override-file", err)
	}
}

// needHAProxy returns the haproxy binary or skips the test.
func needHAProxy(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("haproxy")
	if err != nil {
		t.Skip("haproxy is not installed")
	}
	return path
}

// HAProxy accepts the command hapsuper builds — user files plus an override
// file holding only a global section — for every testdata configuration.
func TestCommandAcceptedByHAProxy(t *testing.T) {
	haproxy := needHAProxy(t)
	files, _ := filepath.Glob("testdata/*.cfg")
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			dir := t.TempDir()
			s, err := conf.Parse([]string{"--override-file", filepath.Join(dir, "override.cfg"),
				"--master-socket", filepath.Join(dir, "master.sock"), "--", haproxy, "-f", file}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := WriteOverride(s); err != nil {
				t.Fatal(err)
			}
			cmd := append(Command(s, false), "-c")
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			out, err := exec.CommandContext(ctx, cmd[0], cmd[1:]...).CombinedOutput()
			if err != nil || !strings.Contains(string(out), "Configuration file is valid") {
				t.Errorf("%q: %v\n%s", cmd, err, out)
			}
		})
	}
}

// The override's hard-stop-after wins over the user's 1h: a soft stop with a
// session that never ends finishes about one second after it fires.
func TestOverrideHardStopAfterWins(t *testing.T) {
	haproxy := needHAProxy(t)
	backend, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer backend.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		if c, err := backend.Accept(); err == nil {
			accepted <- c // held open: the session never ends by itself
		}
	}()
	port := freePort(t)
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"user.cfg": fmt.Sprintf(`global
    hard-stop-after 1h
defaults
    mode tcp
    timeout connect 1s
    timeout client 1h
    timeout server 1h
listen hold
    bind 127.0.0.1:%d
    server backend %s
`, port, backend.Addr())})
	s, err := conf.Parse([]string{"--grace-period", "3s", "--margin", "2s", "--quiet-period", "200ms",
		"--override-file", filepath.Join(dir, "override.cfg"), "--master-socket", filepath.Join(dir, "master.sock"),
		"--", haproxy, "-f", filepath.Join(dir, "user.cfg")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteOverride(s); err != nil { // hard-stop-after 1000ms
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := Command(s, false)
	proc := exec.CommandContext(ctx, cmd[0], cmd[1:]...)
	var logs strings.Builder
	proc.Stderr, proc.Stdout = &logs, &logs
	defer func() { t.Logf("%q:\n%s", cmd, logs.String()) }()
	if err := proc.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- proc.Wait() }()

	client := dialUntil(t, fmt.Sprintf("127.0.0.1:%d", port), 5*time.Second)
	defer client.Close()
	select {
	case c := <-accepted:
		defer c.Close()
	case <-time.After(5 * time.Second):
		t.Fatal("HAProxy did not connect to the backend within 5s")
	}

	// A SIGUSR1 that reaches the master before its event loop runs is lost
	// (seen with 2.6.12): wait until the master CLI answers.
	waitMasterCLI(t, s.MasterSocket, 5*time.Second)
	start := time.Now()
	if err := proc.Process.Signal(syscall.SIGUSR1); err != nil { // soft stop
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		took := time.Since(start)
		if err != nil {
			t.Errorf("HAProxy exited with %v after the soft stop, want 0", err)
		}
		if took < 900*time.Millisecond {
			t.Errorf("HAProxy exited %v after the soft stop, before hard-stop-after 1000ms: the session was not held", took)
		}
		t.Logf("HAProxy exited %v after the soft stop", took)
	case <-time.After(6 * time.Second):
		t.Fatal("HAProxy still running 6s after the soft stop: the user's hard-stop-after 1h won over the override")
	}
}

// waitMasterCLI waits until HAProxy's master answers `show proc`.
func waitMasterCLI(t *testing.T, socket string, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		out, err := masterCommand(socket, "show proc")
		if err == nil && strings.Contains(out, "master") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("HAProxy master CLI at %s did not answer show proc within %v: %v %q", socket, limit, err, out)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// masterCommand sends one command and reads the answer up to the empty line
// that ends it.
func masterCommand(socket, command string) (string, error) {
	c, err := net.DialTimeout("unix", socket, time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(2 * time.Second)); err != nil {
		return "", err
	}
	if _, err := io.WriteString(c, command+"\n"); err != nil {
		return "", err
	}
	var out strings.Builder
	r := bufio.NewReader(c)
	for {
		line, err := r.ReadString('\n')
		out.WriteString(line)
		if line == "\n" || err != nil {
			return out.String(), err
		}
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// dialUntil connects to addr, retrying while HAProxy starts.
func dialUntil(t *testing.T, addr string, limit time.Duration) net.Conn {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("connect to HAProxy at %s: %v", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A file at the override path that hapsuper did not write (one of the
// user's -f files, say) is not overwritten; one it wrote is, and so is no
// file at all.
func TestWriteOverrideKeepsOthersFiles(t *testing.T) {
	dir := t.TempDir()
	user := filepath.Join(dir, "haproxy.cfg")
	if err := os.WriteFile(user, []byte("frontend web\n    bind :80\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := conf.Parse(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.OverrideFile = user
	err = WriteOverride(s)
	if err == nil || !strings.Contains(err.Error(), "was not written by hapsuper") {
		t.Fatalf("WriteOverride over the user's file: %v, want a refusal", err)
	}
	if b, _ := os.ReadFile(user); !strings.Contains(string(b), "frontend web") {
		t.Fatalf("the user's file was changed: %q", b)
	}
	s.OverrideFile = filepath.Join(dir, "override.cfg")
	for range 2 { // made, then replaced
		if err := WriteOverride(s); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "adir"), 0o755); err != nil {
		t.Fatal(err)
	}
	s.OverrideFile = filepath.Join(dir, "adir")
	if err := WriteOverride(s); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("WriteOverride over a directory: %v", err)
	}
}

// With --lb-check-bind the override adds the health check, which HAProxy
// accepts after the user's files without a warning (its answers, 200 then
// 503, are test/integration's TestLBCheck_BalancerMarksThePodDown).
func TestOverrideLBCheck(t *testing.T) {
	haproxy := needHAProxy(t)
	dir := t.TempDir()
	port := freePort(t)
	writeFiles(t, dir, map[string]string{"user.cfg": "defaults\n    mode tcp\n    timeout connect 1s\n    timeout client 1s\n    timeout server 1s\n" +
		"frontend web\n    bind 127.0.0.1:" + strconv.Itoa(freePort(t)) + "\n    mode http\n    http-request return status 200\n"})
	s, err := conf.Parse([]string{"--lb-check-bind", "127.0.0.1:" + strconv.Itoa(port), "--lb-check-threshold", "2",
		"--override-file", filepath.Join(dir, "override.cfg"), "--master-socket", filepath.Join(dir, "master.sock"),
		"--", haproxy, "-f", filepath.Join(dir, "user.cfg")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteOverride(s); err != nil {
		t.Fatal(err)
	}
	text, err := overrideText(s)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"frontend " + LBCheck, "bind 127.0.0.1:" + strconv.Itoa(port), "http-request track-sc0 src",
		"if { nbsrv(" + LBCheckBackend + ") eq 0 }", "backend " + LBCheckBackend, "server serving "} {
		if !strings.Contains(text, want) {
			t.Errorf("override lacks %q:\n%s", want, text)
		}
	}
	out, err := exec.Command(haproxy, "-c", "-f", filepath.Join(dir, "user.cfg"), "-f", s.OverrideFile).CombinedOutput()
	if err != nil || strings.Contains(string(out), "WARNING") {
		t.Fatalf("haproxy -c with the override: %v\n%s", err, out)
	}

	// Every form of address LBCheckAddr accepts, HAProxy binds.
	for _, host := range []string{"", "*", "127.0.0.1", "[::1]", "[::ffff:127.0.0.1]"} {
		s.LBCheckBind = host + ":0" + strconv.Itoa(port)
		if err := WriteOverride(s); err != nil {
			t.Fatalf("--lb-check-bind %s: %v", s.LBCheckBind, err)
		}
		out, err := exec.Command(haproxy, "-c", "-f", filepath.Join(dir, "user.cfg"), "-f", s.OverrideFile).CombinedOutput()
		if err != nil || strings.Contains(string(out), "WARNING") {
			t.Errorf("haproxy -c with --lb-check-bind %s: %v\n%s", s.LBCheckBind, err, out)
		}
	}
}
