package status

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hapsuper/hapsuper/drain"
)

// startBoard serves board at a new socket; the caller closes the server.
func startBoard(t *testing.T, board *Board) (*Server, string, chan error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "status.sock")
	srv, err := Listen(path, board, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve() }()
	t.Cleanup(srv.Close)
	return srv, path, done
}

// A watch gets a snapshot every interval and, when the server closes, the
// snapshot of that moment: the supervisor's exit with the drain's reason.
// The repeated final snapshot is shown once.
func TestWatchEndsWithTheExit(t *testing.T) {
	board := NewBoard(Snapshot{Phase: drain.Serving})
	srv, path, done := startBoard(t, board)

	var mu sync.Mutex
	var shown []Snapshot
	type result struct {
		last Snapshot
		err  error
	}
	res := make(chan result, 1)
	go func() {
		last, err := Watch(path, 50*time.Millisecond, time.Second, func(s Snapshot) error {
			mu.Lock()
			shown = append(shown, s)
			mu.Unlock()
			return nil
		})
		res <- result{last, err}
	}()
	time.Sleep(300 * time.Millisecond)
	board.Publish(Snapshot{Phase: drain.Draining})
	time.Sleep(200 * time.Millisecond)
	exit := Snapshot{Phase: drain.Exited, Drain: Drain{Phase: drain.Exited, Reason: drain.ReasonQuiet, Detail: "the detail"}}
	board.Publish(exit)
	srv.Close() // at once: the watch must get the exit from Close's final write
	r := <-res
	if r.err != nil {
		t.Fatalf("Watch: %v", r.err)
	}
	if r.last.Phase != drain.Exited || r.last.Drain.Reason != drain.ReasonQuiet || r.last.Drain.Detail != "the detail" {
		t.Errorf("last snapshot %+v, want the exit with reason quiet", r.last)
	}
	mu.Lock()
	defer mu.Unlock()
	var phases []string
	exits := 0
	for _, s := range shown {
		if len(phases) == 0 || phases[len(phases)-1] != string(s.Phase) {
			phases = append(phases, string(s.Phase))
		}
		if s.Phase == drain.Exited {
			exits++
		}
	}
	if strings.Join(phases, ",") != "serving,draining,exited" || exits != 1 {
		t.Errorf("shown phases %v with %d exits; want serving,draining,exited with one", phases, exits)
	}
	if len(shown) < 6 {
		t.Errorf("%d snapshots in 0.5 s at 50ms", len(shown))
	}
	select {
	case <-done:
	case <-time.After(time.Second):
		t.Error("Serve did not return within 1s of Close")
	}
}

// A connection that ends before a snapshot of phase exited is ErrGone, with
// the last snapshot shown.
func TestWatchWithoutExitIsGone(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fake.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		buf := make([]byte, 64)
		c.Read(buf)
		io.WriteString(c, `{"phase":"draining"}`+"\n")
		c.Close() // killed: no final snapshot
	}()
	last, err := Watch(path, 50*time.Millisecond, time.Second, func(Snapshot) error { return nil })
	if !errors.Is(err, ErrGone) || last.Phase != drain.Draining {
		t.Errorf("Watch = %v, %v; want the draining snapshot and ErrGone", last.Phase, err)
	}
}

// A watcher that stops reading delays Close by finalTimeout at most, and
// the server refuses more than maxWatchers watches, still answering status.
func TestWatchersCannotHoldTheServer(t *testing.T) {
	big := Snapshot{Phase: drain.Serving, Settings: Settings{Routing: strings.Repeat("x", 64<<10)}}
	srv, path, done := startBoard(t, NewBoard(big))
	var conns []net.Conn
	for i := 0; i < maxWatchers+1; i++ {
		c, err := net.Dial("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		io.WriteString(c, "watch 50ms\n") // and never read: the socket buffer fills
		conns = append(conns, c)
	}
	time.Sleep(300 * time.Millisecond)
	// The extra watcher was refused; one-shot status is answered.
	if _, err := Fetch(path, 2*time.Second); err != nil {
		t.Errorf("status with %d watchers: %v", maxWatchers, err)
	}
	refused := 0
	for _, c := range conns {
		c.SetReadDeadline(time.Now().Add(time.Second))
		var s Snapshot
		if err := json.NewDecoder(c).Decode(&s); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(s.Error, "too many watches") {
			refused++
		}
	}
	if refused != 1 {
		t.Errorf("%d watches refused, want 1 (of %d, at most %d)", refused, maxWatchers+1, maxWatchers)
	}
	start := time.Now()
	srv.Close()
	select {
	case <-done:
		if d := time.Since(start); d > finalTimeout+200*time.Millisecond {
			t.Errorf("Serve returned %v after Close, want within finalTimeout %v", d, finalTimeout)
		}
	case <-time.After(2 * time.Second):
		t.Error("Serve did not return within 2s of Close")
	}
}

func TestWatchInterval(t *testing.T) {
	for arg, ok := range map[string]bool{"": true, "100ms": true, "50ms": true, "10ms": false, "2m": false, "abc": false} {
		if _, err := watchInterval(arg); (err == nil) != ok {
			t.Errorf("watchInterval(%q): %v", arg, err)
		}
	}
}
