package status

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hapsuper/hapsuper/drain"
)

// fuzzSnapshot is what the fuzzed server publishes: a drain in progress
// with workers and settings, so that the JSON has every kind of field.
func fuzzSnapshot() Snapshot {
	t0 := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	return Snapshot{
		Phase: drain.Draining, MasterPID: 3983, ObservedAt: t0.Add(time.Second),
		Drain: Drain{Phase: drain.Draining, StopRequested: t0, Bound: t0.Add(18 * time.Second), Deadline: t0.Add(28 * time.Second),
			Conditions: []Condition{{Name: "quiet", Since: t0}}},
		Workers:  []Worker{{PID: 4288, Sessions: 2, Requests: 7}, {PID: 4006, Old: true, Sessions: 1, Requests: 5}},
		Settings: Settings{GracePeriod: Duration(30 * time.Second), QuietPeriod: Duration(2 * time.Second), Routing: "off"},
	}
}

// listenForFuzz starts a Server on a socket in a temporary directory, for
// the whole fuzz run; cleanup closes it and waits for Serve (5 s at most).
func listenForFuzz(tb testing.TB, snap Snapshot) string {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "status.sock")
	srv, err := Listen(path, NewBoard(snap), slog.New(slog.DiscardHandler))
	if err != nil {
		tb.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve() }()
	tb.Cleanup(func() {
		srv.Close()
		select {
		case err := <-done:
			if err != nil {
				tb.Errorf("Serve returned %v after Close", err)
			}
		case <-time.After(5 * time.Second):
			tb.Error("Serve did not return within 5s of Close")
		}
	})
	return path
}

// expectedReply is the protocol of the package doc, from the request bytes
// alone: the first line (at most maxRequestLine bytes with its newline; all
// of a shorter request without one), spaces trimmed, is "" or "status" for
// the snapshot; anything else is an error, "request too long" when no line
// ends within maxRequestLine bytes.
func expectedReply(req []byte) (snapshot, tooLong bool) {
	line := req
	if i := bytes.IndexByte(req, '\n'); i >= 0 && i < maxRequestLine {
		line = req[:i+1]
	} else if len(req) >= maxRequestLine {
		return false, true
	}
	r := strings.TrimSpace(string(line))
	return r == "" || r == "status", false
}

// FuzzServerRequest sends arbitrary bytes to a real Server, then shuts its
// sending side as a client at the end of its input would. The reply must be
// exactly one JSON document: the published snapshot for a status request,
// otherwise a zero snapshot with only "error" set, saying what to send.
// Every exchange is bounded by deadlines, and a good request still gets the
// snapshot afterwards.
func FuzzServerRequest(f *testing.F) {
	for _, req := range []string{
		"status\n", // what Fetch (hapsuper status) sends
		"", "\n", "status", " status \r\n", "STATUS\n", "status\nstatus\n", "status\x00\n",
		"shutdown\n", "\x00\xff\xfe\n", `{"status":true}` + "\n",
		strings.Repeat("a", maxRequestLine-1) + "\n", strings.Repeat("a", maxRequestLine) + "\n",
		strings.Repeat(" ", maxRequestLine+10) + "status\n", "status\n" + strings.Repeat("x", 4096),
	} {
		f.Add([]byte(req))
	}
	snap := fuzzSnapshot()
	want, err := json.Marshal(snap)
	if err != nil {
		f.Fatal(err)
	}
	want = append(want, '\n')
	path := listenForFuzz(f, snap)

	f.Fuzz(func(t *testing.T, req []byte) {
		reply, readErr := exchangeBytes(t, path, req)
		isSnapshot, tooLong := expectedReply(req)
		switch {
		case isSnapshot && !bytes.Equal(reply, want):
			t.Fatalf("reply to %.80q = %q, want the snapshot %q", req, reply, want)
		case !isSnapshot:
			var got Snapshot
			dec := json.NewDecoder(bytes.NewReader(reply))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&got); err != nil || dec.InputOffset() != int64(len(reply))-1 || !bytes.HasSuffix(reply, []byte("\n")) {
				t.Fatalf("reply to %.80q is not one JSON document and a newline (%v): %q", req, err, reply)
			}
			msg := got.Error
			got.Error = ""
			if !isZero(got) || !strings.Contains(msg, `send "status\n"`) {
				t.Fatalf("reply to %.80q = %q, want only an error saying what to send", req, reply)
			}
			if tooLong != strings.HasPrefix(msg, "request too long") || !tooLong && !strings.HasPrefix(msg, "unknown request ") {
				t.Fatalf("reply to %.80q: error %q (too long: %v)", req, msg, tooLong)
			}
		}
		// The server closes once it has its line, and a too long request
		// after reading up to 64 KiB of it: when more of the request is
		// still unread ("status\n" and 4 KiB more), Linux resets the
		// connection, after the reply, which the checks above read whole.
		if readErr != nil && !errors.Is(readErr, syscall.ECONNRESET) {
			t.Fatalf("read reply to %.80q: %v (got %q)", req, readErr, reply)
		}
		if got, err := Fetch(path, 5*time.Second); err != nil || got.MasterPID != snap.MasterPID {
			t.Fatalf("status after %.80q: %+v, %v", req, got, err)
		}
	})
}

// exchangeBytes writes req while reading the whole reply, within 5 s.
func exchangeBytes(t *testing.T, path string, req []byte) ([]byte, error) {
	t.Helper()
	c, err := net.DialTimeout("unix", path, time.Second)
	if err != nil {
		t.Fatalf("connect to status socket: %v", err)
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		// The server may stop reading a long request: errors are expected.
		if _, err := c.Write(req); err == nil {
			c.(*net.UnixConn).CloseWrite()
		}
	}()
	reply, err := io.ReadAll(c)
	<-wrote // the deadline bounds the write too
	return reply, err
}

func isZero(s Snapshot) bool {
	b, _ := json.Marshal(s)
	z, _ := json.Marshal(Snapshot{})
	return bytes.Equal(b, z)
}
