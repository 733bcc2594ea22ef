package status

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hapsuper/hapsuper/drain"
)

func startServer(t *testing.T, snap Snapshot) (*Server, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "status.sock")
	srv, err := Listen(path, NewBoard(snap), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve() }()
	t.Cleanup(func() {
		srv.Close()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Serve returned %v after Close", err)
			}
		case <-time.After(5 * time.Second):
			t.Error("Serve did not return within 5s of Close")
		}
	})
	return srv, path
}

// exchange sends raw bytes and returns the whole reply.
func exchange(t *testing.T, path, req string) string {
	t.Helper()
	c, err := net.DialTimeout("unix", path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	io.WriteString(c, req)
	c.(*net.UnixConn).CloseWrite()
	b, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("read reply to %.40q: %v", req, err)
	}
	return string(b)
}

func TestServerAnswersStatus(t *testing.T) {
	want := Snapshot{Phase: drain.Draining, MasterPID: 42, Workers: []Worker{{PID: 43, Sessions: 2, Requests: 7}}}
	_, path := startServer(t, want)
	got, err := Fetch(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if got.Phase != want.Phase || got.MasterPID != 42 || len(got.Workers) != 1 || got.Workers[0].Requests != 7 {
		t.Errorf("Fetch = %+v, want %+v", got, want)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if perm := fi.Mode().Perm(); perm != 0o600 {
		t.Errorf("socket mode %o, want 600", perm)
	}
}

func TestServerRefusesMalformedRequests(t *testing.T) {
	_, path := startServer(t, Snapshot{Phase: drain.Serving})
	tests := []struct{ name, req, want string }{
		{"unknown command", "shutdown\n", `unknown request \"shutdown\"`},
		{"binary garbage", "\x00\xff\xfe\n", "unknown request"},
		{"too long", strings.Repeat("a", 4096), "request too long"},
		{"empty line is a status request", "\n", `"phase":"serving"`},
		{"no newline before EOF", "status", `"phase":"serving"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := exchange(t, path, tt.req); !strings.Contains(got, tt.want) {
				t.Errorf("reply to %.40q = %q, want it to contain %q", tt.req, got, tt.want)
			}
		})
	}
	// The server is still there after all of that.
	if _, err := Fetch(path, time.Second); err != nil {
		t.Errorf("Fetch after malformed requests: %v", err)
	}
}

func TestServerSurvivesSilentClients(t *testing.T) {
	_, path := startServer(t, Snapshot{Phase: drain.Serving})
	// More idle connections than the server serves at once: each is
	// dropped after requestTimeout, and a real request gets through within
	// the 2 s a client used to wait (it waits 5 s now).
	var idle []net.Conn
	for range maxConns + 4 {
		c, err := net.Dial("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		idle = append(idle, c)
	}
	defer func() {
		for _, c := range idle {
			c.Close()
		}
	}()
	if _, err := Fetch(path, 2*time.Second); err != nil {
		t.Fatalf("Fetch with %d idle clients: %v", len(idle), err)
	}
}

// Close cuts the connections being handled and Serve returns at once: a
// status client must not delay the exit of PID 1 past the kubelet's
// SIGKILL (17 silent clients delayed it 2.7 s).
func TestServerCloseDoesNotWaitForClients(t *testing.T) {
	dir := t.TempDir()
	srv, err := Listen(filepath.Join(dir, "status.sock"), NewBoard(Snapshot{}), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve() }()
	for range maxConns + 1 {
		c, err := net.Dial("unix", filepath.Join(dir, "status.sock"))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	time.Sleep(50 * time.Millisecond) // let Serve take them
	start := time.Now()
	srv.Close()
	select {
	case err := <-served:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve still runs 5 s after Close")
	}
	if took := time.Since(start); took >= requestTimeout {
		t.Errorf("Serve returned %v after Close, want well under a request's timeout %v", took, requestTimeout)
	}
}

func TestRender(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	s := Snapshot{
		Phase:     drain.Stopping,
		MasterPID: 10,
		Settings:  Settings{Routing: "kube-proxy"},
		Drain: Drain{
			Phase: drain.Stopping, StopRequested: t0, Bound: t0.Add(18 * time.Second), Deadline: t0.Add(28 * time.Second),
			SoftStop: t0.Add(2500 * time.Millisecond), Reason: drain.ReasonQuiet,
			Conditions: []Condition{{Name: "quiet", Met: true, Since: t0.Add(500 * time.Millisecond)}},
		},
		Workers: []Worker{{PID: 11, Sessions: 3, Requests: 99}, {PID: 9, Old: true, Sessions: 1}},
	}
	var b bytes.Buffer
	if err := Render(&b, s, t0.Add(3*time.Second)); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"phase:", "stopping", "reason:", "quiet", "soft stop:", "2.5s after the stop request",
		"deadline:", "in 25s", "routing observation:", "kube-proxy", "condition quiet:", "met, last change 2.5s ago", "11", "current", "old", "99", "workers: 2, sessions: 4"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("Render output lacks %q:\n%s", want, b.String())
		}
	}
	var js bytes.Buffer
	if err := json.NewEncoder(&js).Encode(s); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(js.String(), `"reason":"quiet"`) || !strings.Contains(js.String(), `"phase":"stopping"`) {
		t.Errorf("JSON lacks phase or drain.reason: %s", js.String())
	}
}

// A file at the socket path that is not a socket is someone else's: Listen
// fails and leaves it; a stale socket is replaced.
func TestListenKeepsWhatIsNotASocket(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "status.sock")
	if err := os.WriteFile(path, []byte("keep me"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Listen(path, NewBoard(Snapshot{}), slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "is not a socket") {
		t.Fatalf("Listen over a regular file: %v, want a refusal", err)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "keep me" {
		t.Fatalf("the file was changed: %q, %v", b, err)
	}
	os.Remove(path)
	old, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	old.SetUnlinkOnClose(false)
	old.Close() // a stale socket file stays
	srv, err := Listen(path, NewBoard(Snapshot{}), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("Listen over a stale socket: %v", err)
	}
	srv.Close()
}

// A socket that answers is a live process's: Listen refuses to replace it
// (a second hapsuper took the first one's status socket so) and leaves it
// serving; a stale datagram socket is told apart from a live one too.
func TestListenKeepsASocketThatAnswers(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "status.sock")
	live, err := Listen(path, NewBoard(Snapshot{Phase: "serving"}), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	go live.Serve()
	defer live.Close()
	if _, err := Listen(path, NewBoard(Snapshot{}), slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "answers") {
		t.Fatalf("Listen over a live status socket: %v, want a refusal", err)
	}
	if s, err := Fetch(path, 5*time.Second); err != nil || s.Phase != "serving" {
		t.Fatalf("the first server no longer answers: %+v, %v", s, err)
	}

	gram := filepath.Join(dir, "notify.sock")
	ln, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: gram, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	if !SocketAnswers(gram) {
		t.Errorf("a bound datagram socket does not answer")
	}
	ln.Close()
	if SocketAnswers(gram) {
		t.Errorf("a stale datagram socket answers")
	}
	if err := RemoveStaleSocket(gram); err != nil {
		t.Errorf("remove a stale datagram socket: %v", err)
	}
}
