package runtimeapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

const haproxyBin = "/usr/sbin/haproxy"

const haproxyConfig = `
defaults
    timeout connect 5s
    timeout client 30s
    timeout server 30s

frontend web
    mode http
    bind 127.0.0.1:%d
    default_backend app

frontend rawtcp
    mode tcp
    bind 127.0.0.1:%d
    default_backend apptcp

backend app
    mode http
    server s1 %s

backend apptcp
    mode tcp
    server s1 %s
`

// TestRealHAProxy drives a real HAProxy master: traffic on an http and a tcp
// frontend, a reload while a request is in flight (so an old worker stays),
// then the old worker's exit while Sample runs.
func TestRealHAProxy(t *testing.T) {
	if _, err := os.Stat(haproxyBin); err != nil {
		t.Skipf("%s not available (%v): install haproxy to test against a real master CLI", haproxyBin, err)
	}
	release := make(chan struct{})
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			select {
			case <-release:
			case <-r.Context().Done():
			case <-time.After(20 * time.Second):
			}
		}
		_, _ = io.WriteString(w, "ok\n")
	}))
	defer backend.Close()
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()

	httpPort, tcpPort := freePort(t), freePort(t)
	addr := strings.TrimPrefix(backend.URL, "http://")
	cfg := writeConfig(t, fmt.Sprintf(haproxyConfig, httpPort, tcpPort, addr, addr))
	sock := startHAProxy(t, cfg)
	c := New(sock, 2*time.Second)
	ctx := context.Background()

	var first Processes
	eventually(t, 10*time.Second, "master answers with one worker", func() (err error) {
		first, err = c.ShowProc(ctx)
		if err == nil && len(first.Current) != 1 {
			err = fmt.Errorf("%d current workers", len(first.Current))
		}
		return err
	})
	worker := first.Current[0].PID

	get := func(path string) error {
		client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
		resp, err := client.Get(fmt.Sprintf("http://127.0.0.1:%d%s", httpPort, path))
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: %s", path, resp.Status)
		}
		return nil
	}
	for range 3 {
		if err := get("/"); err != nil {
			t.Fatal(err)
		}
	}
	tcpRequest(t, tcpPort)

	s, err := c.Sample(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Workers) != 1 || s.Workers[0].Info.PID != worker || s.Workers[0].Info.Stopping {
		t.Fatalf("sample before reload = %+v; want worker %d, not stopping", s, worker)
	}
	want := []Frontend{{Name: "web", Mode: "http", Status: "OPEN", Stot: 3, ReqTot: 3, ConnTot: 3, HasConnTot: true}, {Name: "rawtcp", Mode: "tcp", Status: "OPEN", Stot: 1, ConnTot: 1, HasConnTot: true}}
	if got := s.Workers[0].Frontends; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("frontends = %+v, want %+v", got, want)
	}

	// A slow request keeps the old worker alive across the reload.
	slow := make(chan error, 1)
	go func() { slow <- get("/slow") }()
	eventually(t, 5*time.Second, "slow request reaches the worker", func() error {
		s, err := c.Sample(ctx)
		if err == nil && s.Workers[0].Frontends[0].Scur != 1 {
			err = fmt.Errorf("web scur %d", s.Workers[0].Frontends[0].Scur)
		}
		return err
	})
	// hapsuper reloads as it does in production: SIGUSR2 to the master.
	if err := syscall.Kill(first.Master.PID, syscall.SIGUSR2); err != nil {
		t.Fatalf("reload: %v", err)
	}
	// For some 50 ms after a 2.6 reload the socket refuses connections.
	eventually(t, 10*time.Second, "old worker listed after reload", func() error {
		procs, err := c.ShowProc(ctx)
		if err == nil && (len(procs.Old) != 1 || procs.Old[0].PID != worker || len(procs.Current) != 1) {
			err = fmt.Errorf("processes %+v", procs)
		}
		return err
	})
	s, err = c.Sample(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Workers) != 2 || s.Master.PID != first.Master.PID || s.Master.Reloads != 1 {
		t.Fatalf("sample after reload = %+v; want the same master, reloaded once, and 2 workers", s)
	}
	cur, old := s.Workers[0], s.Workers[1]
	if !old.Process.Old || old.Info.PID != worker || !old.Info.Stopping || old.Info.CurrConns < 1 ||
		old.Frontends[0].Status != "STOP" || old.Frontends[0].Scur != 1 || old.Frontends[0].ReqTot != 4 {
		t.Errorf("old worker = %+v; want stopping, one session, 4 requests", old)
	}
	if cur.Process.Old || cur.Info.Stopping || cur.Frontends[0].Status != "OPEN" || cur.Frontends[0].Stot != 0 {
		t.Errorf("new worker = %+v; want open with fresh counters", cur)
	}

	if reply, err := c.roundTrip(ctx, infoCommand(1)); err != nil {
		t.Errorf("show info on pid 1: %v", err)
	} else if _, err := splitOutputs(reply, 1); !errors.Is(err, ErrNoSuchProcess) || !strings.Contains(err.Error(), "'@!1'") {
		t.Errorf("show info on pid 1: %v; want ErrNoSuchProcess naming the pid", err)
	}
	if reply, err := c.roundTrip(ctx, "no such command"); err != nil || !errors.Is(answerError(reply), ErrCLI) {
		t.Errorf("unknown command: reply %q, %v; want an error answer", firstLine(reply), err)
	}

	// The old worker finishes its request and exits while Sample runs:
	// every Sample succeeds, skipping it if it is caught exiting.
	close(release)
	if err := <-slow; err != nil {
		t.Errorf("in-flight request across the reload: %v", err)
	}
	eventually(t, 10*time.Second, "old worker exits", func() error {
		s, err := c.Sample(ctx)
		if err != nil {
			t.Fatalf("sample while the old worker exits: %v", err)
		}
		if len(s.Workers) != 1 {
			return fmt.Errorf("%d workers", len(s.Workers))
		}
		return nil
	})
}

// TestRealHAProxyFailedReload: a reload (SIGUSR2 to the master) of a broken
// configuration shows in show proc as the master's FailedReloads.
func TestRealHAProxyFailedReload(t *testing.T) {
	if _, err := os.Stat(haproxyBin); err != nil {
		t.Skipf("%s not available (%v): install haproxy to test against a real master CLI", haproxyBin, err)
	}
	cfg := writeConfig(t, fmt.Sprintf("frontend web\n    mode http\n    timeout client 5s\n    bind 127.0.0.1:%d\n", freePort(t)))
	c := New(startHAProxy(t, cfg), 2*time.Second)
	ctx := context.Background()
	var procs Processes
	eventually(t, 10*time.Second, "master answers", func() (err error) { procs, err = c.ShowProc(ctx); return err })
	if err := os.WriteFile(cfg, []byte("frontend web\n    bogus_keyword\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(procs.Master.PID, syscall.SIGUSR2); err != nil {
		t.Fatalf("reload with a broken config: %v", err)
	}
	eventually(t, 10*time.Second, "master counts the failed reload", func() error {
		procs, err := c.ShowProc(ctx)
		if err == nil && procs.Master.FailedReloads != 1 {
			err = fmt.Errorf("master %+v", procs.Master)
		}
		return err
	})
}

// startHAProxy runs haproxy in master-worker mode and stops it (SIGTERM,
// bounded) when the test ends. It returns the master socket's path.
func startHAProxy(t *testing.T, cfg string) string {
	t.Helper()
	dir := filepath.Dir(cfg)
	sock := filepath.Join(dir, "master.sock")
	logf, err := os.Create(filepath.Join(dir, "haproxy.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(haproxyBin, "-W", "-db", "-S", sock+",mode,600,level,admin", "-f", cfg)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("start haproxy: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-done
			t.Errorf("haproxy did not stop within 5s of SIGTERM")
		}
		logf.Close()
		if t.Failed() {
			out, _ := os.ReadFile(logf.Name())
			t.Logf("haproxy output:\n%s", out)
		}
	})
	return sock
}

func writeConfig(t *testing.T, cfg string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "haproxy.cfg")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// tcpRequest sends one HTTP/1.0 request through the tcp frontend.
func tcpRequest(t *testing.T, port int) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(conn, "GET / HTTP/1.0\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	if reply, err := io.ReadAll(conn); err != nil || !strings.HasPrefix(string(reply), "HTTP/1.0 200") {
		t.Fatalf("tcp frontend reply %q, %v", firstLine(string(reply)), err)
	}
}

// eventually polls f every 20ms until it returns nil, failing the test with
// the last error after limit.
func eventually(t *testing.T, limit time.Duration, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v: %v", what, limit, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
