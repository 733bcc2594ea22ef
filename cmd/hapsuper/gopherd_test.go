package main

import (
	"bytes"
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

func TestShimCommand(t *testing.T) {
	for argv0, want := range map[string]bool{"gopherd": true, "/usr/local/bin/gopherd": true, "/command/s6-svc": true, "hapsuper": false, "/usr/local/bin/hapsuper": false, "gopherd-x": false, "s6-svscan": false} {
		if _, got := shimCommand(argv0); got != want {
			t.Errorf("shimCommand(%q) = %v, want %v", argv0, got, want)
		}
	}
}

// fakeReloads serves a status socket whose reloads are answered by answer
// (standing in for hapsuper's loop); the socket is in the environment.
func fakeReloads(t *testing.T, answer func(status.ReloadAsk) status.ReloadReply) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "status.sock")
	t.Setenv(conf.StatusSocketEnv, sock)
	srv, err := status.Listen(sock, status.NewBoard(status.Snapshot{Phase: drain.Serving}), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	asks := make(chan status.ReloadAsk)
	srv.TakeReloads(asks)
	done := make(chan struct{})
	go srv.Serve()
	go func() {
		for {
			select {
			case a := <-asks:
				a.Done <- answer(a)
			case <-done:
				return
			}
		}
	}()
	t.Cleanup(func() { close(done); srv.Close() })
}

// Both forms ask the status socket for a reload on gopherd's behalf and
// end with that reload's outcome: 0 with the new worker, 1 when refused,
// and 1 with hapsuper's reason when it sends none (stopping).
func TestGopherdReloadThroughStatusSocket(t *testing.T) {
	for _, tc := range []struct {
		args  []string
		reply status.ReloadReply
		code  int
		want  string
	}{
		{[]string{"signal", "haproxy", "SIGUSR2"}, status.ReloadReply{Reload: &status.Reload{Result: status.ReloadOK, Worker: 4242}}, 0, "worker 4242 serves"},
		{[]string{"haproxy", "restart"}, status.ReloadReply{Reload: &status.Reload{Result: status.ReloadRefused, Detail: "[ALERT] bad line"}}, 1, "reload refused: [ALERT] bad line"},
		{[]string{"haproxy", "restart"}, status.ReloadReply{Error: "HAProxy is stopping: no reload is sent now"}, 1, "stopping"},
	} {
		t.Run(strings.Join(tc.args, " ")+" "+tc.want, func(t *testing.T) {
			origin := make(chan string, 1)
			fakeReloads(t, func(a status.ReloadAsk) status.ReloadReply { origin <- a.Origin; return tc.reply })
			var out, errb bytes.Buffer
			code := gopherdCommand(tc.args, &out, &errb)
			if code != tc.code {
				t.Errorf("exit %d, want %d; stdout %q stderr %q", code, tc.code, out.String(), errb.String())
			}
			if got := out.String() + errb.String(); !strings.Contains(got, tc.want) {
				t.Errorf("output %q lacks %q", got, tc.want)
			}
			select {
			case o := <-origin:
				if o != "gopherd" {
					t.Errorf("origin %q, want gopherd", o)
				}
			case <-time.After(10 * time.Second):
				t.Error("no reload was asked")
			}
		})
	}
}

// s6-svc -2 and -h on the haproxy service ask for the reload as gopherd
// does; every other option, and another service, exit 100 (s6's wrong
// usage) naming what is answered, before any socket is touched.
func TestS6Svc(t *testing.T) {
	asked := make(chan string, 8)
	fakeReloads(t, func(a status.ReloadAsk) status.ReloadReply {
		asked <- a.Origin
		return status.ReloadReply{Reload: &status.Reload{Result: status.ReloadOK, Worker: 7}}
	})
	for _, args := range [][]string{{"-2", "/run/service/haproxy"}, {"-h", "/run/service/haproxy/"}} {
		var out, errb bytes.Buffer
		if code := s6svcCommand(args, &out, &errb); code != 0 || !strings.Contains(out.String(), "worker 7 serves") {
			t.Errorf("s6-svc %q: exit %d, stdout %q stderr %q; want 0 and the worker", args, code, out.String(), errb.String())
		}
		if o := <-asked; o != "s6-svc" {
			t.Errorf("origin %q, want s6-svc", o)
		}
	}
	for _, args := range [][]string{nil, {"-d", "/run/service/haproxy"}, {"-r", "/run/service/haproxy"}, {"-t", "/run/service/haproxy"}, {"-2"}, {"-2", "/run/service/controller"}, {"-wu", "-2", "/run/service/haproxy"}} {
		var out, errb bytes.Buffer
		if code := s6svcCommand(args, &out, &errb); code != 100 || !strings.Contains(errb.String(), "haproxy") {
			t.Errorf("s6-svc %q: exit %d, stderr %q; want 100 naming what is answered", args, code, errb.String())
		}
	}
	select {
	case o := <-asked:
		t.Errorf("a refused s6-svc asked for a reload (%s)", o)
	default:
	}
}
