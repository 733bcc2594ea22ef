package main

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hapsuper/hapsuper/conf"
	"github.com/hapsuper/hapsuper/drain"
	"github.com/hapsuper/hapsuper/status"
)

// `hapsuper status` against a running status socket: the text and the JSON
// both end with a newline, so that the shell prompt starts on its own line.
func TestStatusOutputEndsWithNewline(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "status.sock")
	snap := status.Snapshot{Phase: drain.Serving, MasterPID: 7, Workers: []status.Worker{{PID: 8, Sessions: 1, Requests: 2}}}
	srv, err := status.Listen(sock, status.NewBoard(snap), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve() }()
	defer func() {
		srv.Close()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Error("the status server did not stop within 5s")
		}
	}()
	for _, args := range [][]string{{"status", "--socket", sock}, {"status", "--socket", sock, "--json"}} {
		code, out, errs := runArgs(args...)
		if code != 0 {
			t.Errorf("hapsuper %s: exit %d: %s", strings.Join(args, " "), code, errs)
		}
		if !strings.Contains(out, "serving") || !strings.HasSuffix(out, "\n") || strings.HasSuffix(out, "\n\n") {
			t.Errorf("hapsuper %s printed %q: want the status ending with one newline", strings.Join(args, " "), out)
		}
	}
}

// `hapsuper status` looks where `hapsuper run` listens when told nothing:
// the same default path and the same environment variable.
func TestStatusSocketFollowsRun(t *testing.T) {
	t.Setenv(conf.StatusSocketEnv, "")
	find := func(flags []conf.Flag, name string) conf.Flag {
		for _, f := range flags {
			if f.Name == name {
				return f
			}
		}
		t.Fatalf("no --%s flag", name)
		return conf.Flag{}
	}
	run, st := find(conf.RunFlags(), "status-socket"), find(describeStatusFlags(), "socket")
	if st.Default == "" || st.Default != run.Default || st.Env != run.Env {
		t.Errorf("status --socket default %q env %q; run --status-socket default %q env %q", st.Default, st.Env, run.Default, run.Env)
	}
}

// serveLater starts a status server at sock after delay, publishes the
// exit of a drain after another delay, and closes: a hapsuper that starts
// after `status --watch` and exits.
func serveLater(t *testing.T, sock string, delay time.Duration) {
	t.Helper()
	go func() {
		time.Sleep(delay)
		board := status.NewBoard(status.Snapshot{Phase: drain.Serving, MasterPID: 7})
		srv, err := status.Listen(sock, board, slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err != nil {
			t.Error(err)
			return
		}
		go srv.Serve()
		time.Sleep(300 * time.Millisecond)
		at := time.Now()
		board.Publish(status.Snapshot{Phase: drain.Exited, MasterPID: 7, Drain: status.Drain{
			Phase: drain.Exited, StopRequested: at.Add(-2 * time.Second), SoftStop: at.Add(-500 * time.Millisecond), Exited: at,
			Reason: drain.ReasonRoutedAway, Detail: "confirmed by kube-proxy on 2 nodes"}})
		srv.Close()
	}()
}

// `status --watch` started before hapsuper waits for its socket, follows
// it, and ends with how the drain ended: in text, a last frame with the
// reason and a line saying so; in JSON, a last document of phase exited
// with the reason (and the line on stderr, so that stdout stays JSON).
func TestStatusWatchWaitsAndEndsWithTheExit(t *testing.T) {
	t.Run("text", func(t *testing.T) {
		sock := filepath.Join(t.TempDir(), "status.sock")
		serveLater(t, sock, 500*time.Millisecond)
		code, out, errs := runArgs("status", "--status-socket", sock, "--watch", "--interval", "50ms")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errs)
		}
		if !strings.Contains(errs, "waiting up to 10s for "+sock) {
			t.Errorf("stderr %q does not say it waits for the socket", errs)
		}
		frames := strings.Split(out, "phase: ")
		last := frames[len(frames)-1]
		for _, want := range []string{"exited", "reason:", "routed-away", "detail:", "confirmed by kube-proxy on 2 nodes", "exited:", "2s after the stop request"} {
			if !strings.Contains(last, want) {
				t.Errorf("last frame lacks %q:\n%s", want, last)
			}
		}
		if strings.Contains(last, "bound:") || strings.Contains(last, "deadline:") {
			t.Errorf("the last frame shows the bound or deadline of an exited drain:\n%s", last)
		}
		lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		if want := "hapsuper exited: drain ended routed-away after 1.5s: confirmed by kube-proxy on 2 nodes"; lines[len(lines)-1] != want {
			t.Errorf("last line %q, want %q", lines[len(lines)-1], want)
		}
		if len(frames) < 4 {
			t.Errorf("%d frames in 0.3 s at 50ms:\n%s", len(frames)-1, out)
		}
	})
	t.Run("json", func(t *testing.T) {
		sock := filepath.Join(t.TempDir(), "status.sock")
		serveLater(t, sock, 300*time.Millisecond)
		code, out, errs := runArgs("status", "--socket", sock, "--watch", "--json", "--interval", "50ms")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errs)
		}
		lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		var last status.Snapshot
		for _, l := range lines {
			if err := json.Unmarshal([]byte(l), &last); err != nil {
				t.Fatalf("stdout line %q is not a status document: %v", l, err)
			}
		}
		if last.Phase != drain.Exited || last.Drain.Reason != drain.ReasonRoutedAway {
			t.Errorf("last document: phase %q reason %q, want exited and routed-away", last.Phase, last.Drain.Reason)
		}
		if !strings.Contains(errs, "hapsuper exited: drain ended routed-away") {
			t.Errorf("stderr %q lacks the end line", errs)
		}
	})
}

// With no hapsuper coming, `status --watch` gives up after its wait, with
// the connection's error; a one-shot status fails at once.
func TestStatusWatchGivesUp(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "none.sock")
	var out, errb bytes.Buffer
	start := time.Now()
	code := watchStatus(sock, 50*time.Millisecond, 600*time.Millisecond, func(status.Snapshot) error { return nil }, &out, &errb)
	if d := time.Since(start); code != 1 || d < 600*time.Millisecond || d > 3*time.Second {
		t.Errorf("watch of no socket: exit %d after %v, want 1 after ~600ms", code, d)
	}
	if !strings.Contains(errb.String(), "no such file") {
		t.Errorf("stderr %q does not say why", errb.String())
	}
	start = time.Now()
	if code, _, _ := runArgs("status", "--socket", sock); code != 1 || time.Since(start) > time.Second {
		t.Errorf("status of no socket: exit %d after %v, want 1 at once", code, time.Since(start))
	}
}
