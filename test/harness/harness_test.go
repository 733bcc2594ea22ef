package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestClassify(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want Kind
	}{
		{nil, KindOK},
		{fmt.Errorf("dial: %w", syscall.ECONNREFUSED), KindRefused},
		{fmt.Errorf("read: %w", syscall.ECONNRESET), KindReset},
		{io.ErrUnexpectedEOF, KindReset},
		{context.DeadlineExceeded, KindTimeout},
		{os.ErrDeadlineExceeded, KindTimeout},
		{errors.New("http2: client connection lost"), KindReset}, // chain lost in formatting
		{errors.New("tls: bad certificate"), KindOther},
	} {
		if got := Classify(tt.err); got != tt.want {
			t.Errorf("Classify(%v) = %s, want %s", tt.err, got, tt.want)
		}
	}
	if ClassifyStatus(503) != Kind5xx || ClassifyStatus(404) != KindOK {
		t.Errorf("ClassifyStatus(503), (404) = %s, %s; want 5xx, ok", ClassifyStatus(503), ClassifyStatus(404))
	}
}

// A log read from a pipe: JSON lines parsed with their own time, other
// lines kept raw, a waiter woken by the line it waits for, the drain read
// back from its lines.
func TestLog(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	var l Log
	go l.Read(r)
	found := make(chan Entry, 1)
	go func() {
		e, _ := l.Wait("drain ended", nil, 5*time.Second, nil)
		found <- e
	}()
	fmt.Fprintln(w, `{"time":"2026-12-01T07:00:00.5Z","level":"INFO","msg":"drain started","signal":"SIGTERM"}`)
	fmt.Fprintln(w, `[WARNING]  (1) : not JSON`)
	fmt.Fprintln(w, `{"time":"2026-12-01T07:00:01Z","level":"INFO","msg":"routing","state":"withdrawn"}`)
	fmt.Fprintln(w, `{"time":"2026-12-01T07:00:02Z","level":"WARN","msg":"drain ended","reason":"bound","detail":"x","err":"e"}`)
	fmt.Fprintln(w, `{"time":"2026-12-01T07:00:03Z","level":"INFO","msg":"haproxy exited","code":0}`)
	w.Close()
	if !l.WaitRead(5 * time.Second) {
		t.Fatal("no EOF within 5s")
	}
	if e := <-found; e.Str("reason") != "bound" || e.Level != "WARN" {
		t.Errorf("Wait returned %+v, want the drain ended line", e)
	}
	if raw, ok := l.WaitRaw("[WARNING]", time.Second); !ok || raw.Fields != nil {
		t.Errorf("WaitRaw: %+v, %v; want the raw line", raw, ok)
	}
	at := func(s string) time.Time { v, _ := time.Parse(time.RFC3339Nano, s); return v }
	d := l.ReadDrain(at("2026-12-01T07:00:00Z"))
	want := Drain{Started: at("2026-12-01T07:00:00.5Z"), Ended: at("2026-12-01T07:00:02Z"), HAProxyExit: at("2026-12-01T07:00:03Z"),
		Withdrawn: at("2026-12-01T07:00:01Z"), HAProxyCode: 0, Reason: "bound", Detail: "x"}
	if d != want {
		t.Errorf("ReadDrain = %+v\nwant %+v", d, want)
	}
	if d := l.ReadDrain(at("2026-12-01T07:00:01.5Z")); !d.Withdrawn.IsZero() {
		t.Errorf("ReadDrain after the withdrawal: Withdrawn %v, want zero", d.Withdrawn)
	}
	if got := l.Warnings(); len(got) != 1 || got[0] != "drain ended: e" {
		t.Errorf("Warnings() = %q", got)
	}
	if n := len(l.Lines()); n != 5 {
		t.Errorf("%d lines, want 5", n)
	}
}

// FreePort never returns a port twice in one process.
func TestFreePortNotTwice(t *testing.T) {
	seen := map[int]bool{}
	for range 500 {
		p, err := FreePort()
		if err != nil {
			t.Fatal(err)
		}
		if seen[p] {
			t.Fatalf("port %d returned twice", p)
		}
		seen[p] = true
	}
}

// A line's instant carries the arrival's monotonic reading, so that it
// compares with the test's own readings on the monotonic clock (a wall-clock
// step between them moves neither), and keeps the stamp's precision.
func TestStampAt(t *testing.T) {
	now := time.Now()
	at := stampAt(now.Round(0).Add(-2*time.Millisecond), now)
	if !strings.Contains(at.String(), " m=") {
		t.Errorf("stampAt(a stamp 2 ms old, now) = %v: no monotonic reading", at)
	}
	if d := now.Sub(at); d != 2*time.Millisecond {
		t.Errorf("stampAt(a stamp 2 ms old, now) is %v before now, want 2ms", d)
	}
	old := time.Date(2026, 12, 1, 7, 0, 0, 0, time.UTC)
	if got := stampAt(old, now); got != old {
		t.Errorf("stampAt(a stamp long before its arrival) = %v, want the stamp itself", got)
	}
	if got := stampAt(now.Round(0).Add(time.Second), now); !got.Equal(now.Add(time.Second)) || strings.Contains(got.String(), " m=") {
		t.Errorf("stampAt(a stamp after its arrival) = %v, want the stamp itself", got)
	}
}
