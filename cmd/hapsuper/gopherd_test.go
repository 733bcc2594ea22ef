package main

import (
	"bytes"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hapsuper/hapsuper/conf"
	"github.com/hapsuper/hapsuper/drain"
	"github.com/hapsuper/hapsuper/status"
)

// Only the two command lines the controllers run are answered; anything
// else is an error that names them, before any socket is touched.
func TestGopherdRefusesOtherForms(t *testing.T) {
	t.Setenv(conf.StatusSocketEnv, filepath.Join(t.TempDir(), "absent.sock"))
	for _, args := range [][]string{nil, {"signal", "haproxy", "SIGTERM"}, {"controller", "restart"}, {"haproxy", "stop"}, {"reload"}} {
		var out, errb bytes.Buffer
		if code := gopherdCommand(args, &out, &errb); code != 2 {
			t.Errorf("gopherd %q: exit %d, want 2", args, code)
		}
		msg := errb.String()
		if !strings.Contains(msg, "`gopherd signal haproxy SIGUSR2`") || !strings.Contains(msg, "`gopherd haproxy restart`") {
			t.Errorf("gopherd %q: the error does not name the supported forms: %s", args, msg)
		}
	}
}

func TestIsGopherd(t *testing.T) {
	for argv0, want := range map[string]bool{"gopherd": true, "/usr/local/bin/gopherd": true, "hapsuper": false, "/usr/local/bin/hapsuper": false, "gopherd-x": false} {
		if got := isGopherd(argv0); got != want {
			t.Errorf("isGopherd(%q) = %v, want %v", argv0, got, want)
		}
	}
}

// Both forms send SIGUSR2 to the process serving the status socket (here
// the test itself, standing in for hapsuper) and end with the reload's
// outcome as the status reports it: 0 with the new worker, 1 when refused.
func TestGopherdReloadThroughStatusSocket(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		result status.ReloadResult
		code   int
		want   string
	}{
		{[]string{"signal", "haproxy", "SIGUSR2"}, status.ReloadOK, 0, "worker 4242 serves"},
		{[]string{"haproxy", "restart"}, status.ReloadRefused, 1, "reload refused: [ALERT] bad line"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			sock := filepath.Join(t.TempDir(), "status.sock")
			t.Setenv(conf.StatusSocketEnv, sock)
			board := status.NewBoard(status.Snapshot{Phase: drain.Serving, Reloads: status.Reloads{OK: 1, Last: &status.Reload{Origin: "master CLI", Result: status.ReloadOK}}})
			srv, err := status.Listen(sock, board, slog.New(slog.NewTextHandler(io.Discard, nil)))
			if err != nil {
				t.Fatal(err)
			}
			go srv.Serve()
			defer srv.Close()
			usr2 := make(chan os.Signal, 1)
			signal.Notify(usr2, syscall.SIGUSR2)
			defer signal.Stop(usr2)
			answered := make(chan struct{})
			go func() { // hapsuper: the signal, then the reload's outcome
				defer close(answered)
				select {
				case <-usr2:
				case <-time.After(10 * time.Second):
					return
				}
				r := status.Reloads{OK: 1}
				last := &status.Reload{Origin: "SIGUSR2", Result: tc.result}
				if tc.result == status.ReloadOK {
					r.OK, last.Worker = 2, 4242
				} else {
					r.Refused, last.Detail = 1, "[ALERT] bad line"
				}
				r.Last = last
				board.Publish(status.Snapshot{Phase: drain.Serving, Reloads: r})
			}()
			var out, errb bytes.Buffer
			code := gopherdCommand(tc.args, &out, &errb)
			<-answered
			if code != tc.code {
				t.Errorf("exit %d, want %d; stdout %q stderr %q", code, tc.code, out.String(), errb.String())
			}
			if got := out.String() + errb.String(); !strings.Contains(got, tc.want) {
				t.Errorf("output %q lacks %q", got, tc.want)
			}
		})
	}
}

// A hapsuper that is stopping HAProxy sends no reload: gopherd says so
// and sends no signal.
func TestGopherdWhileStopping(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "status.sock")
	t.Setenv(conf.StatusSocketEnv, sock)
	srv, err := status.Listen(sock, status.NewBoard(status.Snapshot{Phase: drain.Stopping}), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve()
	defer srv.Close()
	usr2 := make(chan os.Signal, 1)
	signal.Notify(usr2, syscall.SIGUSR2)
	defer signal.Stop(usr2)
	var out, errb bytes.Buffer
	if code := gopherdCommand([]string{"signal", "haproxy", "SIGUSR2"}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "stopping") {
		t.Errorf("exit %d, stderr %q; want 1 and that it is stopping", code, errb.String())
	}
	select {
	case <-usr2:
		t.Error("SIGUSR2 sent to a stopping hapsuper")
	case <-time.After(200 * time.Millisecond):
	}
}
