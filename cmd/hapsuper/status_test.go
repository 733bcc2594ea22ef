package main

import (
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
