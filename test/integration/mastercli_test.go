package integration

import (
	"io"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hapsuper/hapsuper/test/harness"
)

// masterCommand sends one line to HAProxy's master CLI and returns the
// answer (the master answers and closes when no prompt is asked for).
func masterCommand(sock, line string) (string, error) {
	c, err := net.DialTimeout("unix", sock, 2*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, line+"\n"); err != nil {
		return "", err
	}
	// The master answers once the client has finished writing.
	_ = c.(*net.UnixConn).CloseWrite()
	b, err := io.ReadAll(c)
	return string(b), err
}

// showProcWorkers parses `show proc`: the current workers, listed before
// the old ones.
func showProcWorkers(out string) []int {
	var current []int
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "# old workers") {
			break
		}
		if f := strings.Fields(line); len(f) >= 2 && f[1] == "worker" {
			if pid, err := strconv.Atoi(f[0]); err == nil {
				current = append(current, pid)
			}
		}
	}
	return current
}

// bareHAProxy is HAProxy run directly in master-worker mode, without
// hapsuper: it checks the harness (configs, clients) and HAProxy's own
// behaviour that the tests rely on.
type bareHAProxy struct {
	*harness.Process
	sock string
}

// startBare runs HAProxy h with cfg in a new test directory and waits until
// its master CLI answers and addr accepts connections.
func startBare(t *testing.T, h haproxyVersion, cfg haproxyConfig, addr string) *bareHAProxy {
	t.Helper()
	dir := t.TempDir()
	b := &bareHAProxy{sock: filepath.Join(dir, "bare-master.sock")}
	var err error
	cmd := exec.Command(h.command(t, dir), "-W", "-db", "-S", b.sock+",mode,600,level,admin", "-f", cfg.write(t, dir))
	if b.Process, err = harness.Start(cmd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		b.Kill()
		killLeftovers(t, dir)
	})
	waitListening(t, addr, 10*time.Second)
	for end := time.Now().Add(5 * time.Second); ; {
		if out, err := masterCommand(b.sock, "show proc"); err == nil {
			if len(showProcWorkers(out)) > 0 {
				checkMaster(t, h, out, b.Pid())
				return b
			}
		}
		if time.Now().After(end) {
			out, err := masterCommand(b.sock, "show proc")
			t.Fatalf("master CLI %s shows no worker: %q %v", b.sock, out, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// checkMaster asserts that the master `show proc` lists is the process the
// test started (the wrapper of a version in a root must exec, not fork) and
// runs version h.
func checkMaster(t *testing.T, h haproxyVersion, showProc string, pid int) {
	t.Helper()
	for _, line := range strings.Split(showProc, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || f[1] != "master" {
			continue
		}
		if f[0] != strconv.Itoa(pid) {
			t.Errorf("show proc lists master %s, but the test started pid %d", f[0], pid)
		}
		if v := f[len(f)-1]; !strings.HasPrefix(v, h.name+".") {
			t.Errorf("show proc says the master runs %s, want %s", v, h.name)
		}
		return
	}
	t.Errorf("show proc lists no master: %q", showProc)
}

// signal sends sig to the master.
func (b *bareHAProxy) signal(t *testing.T, sig syscall.Signal) time.Time {
	t.Helper()
	at := time.Now()
	if err := b.Signal(sig); err != nil {
		t.Fatal(err)
	}
	return at
}

// wait waits for the master to exit and returns its exit code (128+signal
// when killed by one) and when it exited.
func (b *bareHAProxy) wait(t *testing.T, timeout time.Duration) (int, time.Time) {
	t.Helper()
	select {
	case <-b.Done():
	case <-time.After(timeout):
		t.Fatalf("haproxy master still running after %s", timeout)
	}
	return b.Exit()
}

// workers returns the current workers from the master CLI.
func (b *bareHAProxy) workers(t *testing.T) []int {
	t.Helper()
	out, err := masterCommand(b.sock, "show proc")
	if err != nil {
		t.Fatalf("show proc: %v", err)
	}
	return showProcWorkers(out)
}
