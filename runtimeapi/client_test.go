package runtimeapi

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

type callResult struct {
	reply   string
	err     error
	elapsed time.Duration
}

func call(ctx context.Context, c *Client, line string) callResult {
	start := time.Now()
	reply, err := c.roundTrip(ctx, line)
	return callResult{reply, err, time.Since(start)}
}

func TestRoundTripSendsOneLineAndHalfCloses(t *testing.T) {
	want := fixture(t, "show-proc.txt")
	f := newFakeMaster(t, func(string) (string, bool) { return want, false })
	c := New(f.path, 2*time.Second)
	r := within(t, 5*time.Second, func() callResult { return call(context.Background(), c, "show proc") })
	if r.err != nil || r.reply != want {
		t.Fatalf("roundTrip = %q, %v; want the fixture, nil", r.reply, r.err)
	}
	if got := f.received(); len(got) != 1 || got[0] != "show proc" || !f.halfOK[0] {
		t.Fatalf("server received %q (half-closed: %v); want one line \"show proc\" then EOF", got, f.halfOK)
	}
}

// The master keeps the connection open while the client's side is open;
// a server that answers but never closes must give an error, not the answer.
func TestRoundTripDeadlines(t *testing.T) {
	for _, tc := range []struct {
		name      string
		reply     string
		cancel    bool // cancel ctx instead of relying on Client.Timeout
		wantCause error
	}{
		{"never answers", "", false, os.ErrDeadlineExceeded},
		{"answers but never closes", fixture(t, "show-info.txt"), false, os.ErrDeadlineExceeded},
		{"half an answer then silence", fixture(t, "show-info.txt")[:300], false, os.ErrDeadlineExceeded},
		{"caller cancels", "", true, context.Canceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeMaster(t, func(string) (string, bool) { return tc.reply, true })
			timeout := 200 * time.Millisecond
			ctx := context.Background()
			if tc.cancel {
				timeout = time.Minute
				var cancel context.CancelFunc
				ctx, cancel = context.WithCancel(ctx)
				time.AfterFunc(200*time.Millisecond, cancel)
			}
			r := within(t, 5*time.Second, func() callResult { return call(ctx, New(f.path, timeout), "show info") })
			if r.err == nil {
				t.Fatalf("roundTrip returned %q with nil error; want a partial reply error", r.reply)
			}
			if !errors.Is(r.err, ErrPartialReply) || !errors.Is(r.err, tc.wantCause) {
				t.Fatalf("error %q: want ErrPartialReply and %v", r.err, tc.wantCause)
			}
			if r.reply != "" {
				t.Fatalf("partial reply %q returned with the error", r.reply)
			}
			if r.elapsed < 150*time.Millisecond || r.elapsed > 3*time.Second {
				t.Fatalf("returned after %v; want about 200ms", r.elapsed)
			}
		})
	}
}

func TestRoundTripContextDeadlineShorterThanTimeout(t *testing.T) {
	f := newFakeMaster(t, func(string) (string, bool) { return "", true })
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	r := within(t, 5*time.Second, func() callResult { return call(ctx, New(f.path, time.Minute), "show proc") })
	if !errors.Is(r.err, context.DeadlineExceeded) || r.elapsed > 3*time.Second {
		t.Fatalf("error %v after %v; want context.DeadlineExceeded after about 150ms", r.err, r.elapsed)
	}
}

func TestRoundTripReplyTooLarge(t *testing.T) {
	big := strings.Repeat("x", MaxReplySize+10)
	f := newFakeMaster(t, func(string) (string, bool) { return big, false })
	r := within(t, 10*time.Second, func() callResult { return call(context.Background(), New(f.path, 5*time.Second), "show proc") })
	if !errors.Is(r.err, ErrReplyTooLarge) || !strings.Contains(r.err.Error(), "4 MiB") {
		t.Fatalf("error %v; want ErrReplyTooLarge naming the 4 MiB limit", r.err)
	}
}

func TestRoundTripNoSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "absent.sock")
	r := within(t, 5*time.Second, func() callResult { return call(context.Background(), New(path, time.Second), "show proc") })
	if !errors.Is(r.err, syscall.ENOENT) || !strings.Contains(r.err.Error(), path) {
		t.Fatalf("error %v; want ENOENT naming %s", r.err, path)
	}
}

func TestZeroTimeoutUsesDefault(t *testing.T) {
	want := fixture(t, "show-proc.txt")
	f := newFakeMaster(t, func(string) (string, bool) { return want, false })
	procs, err := within(t, 5*time.Second, func() result[Processes] {
		return wrap((&Client{Socket: f.path}).ShowProc(context.Background()))
	}).get()
	if err != nil || procs.Master.PID != 3983 {
		t.Fatalf("ShowProc with zero Timeout = %+v, %v", procs, err)
	}
}

type result[T any] struct {
	v   T
	err error
}

func wrap[T any](v T, err error) result[T] { return result[T]{v, err} }
func (r result[T]) get() (T, error)        { return r.v, r.err }
