package status

import (
	"bytes"
	"errors"
	"io"
	"net"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// endlessSocket serves one connection at a new socket: it reads the
// request, writes head, then an endless JSON string until the client
// closes. The returned channel is closed when it has stopped writing.
func endlessSocket(t *testing.T, head string) (string, <-chan struct{}) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "endless.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(30 * time.Second)) // bounded even if the client hangs
		buf := make([]byte, 64)
		c.Read(buf)
		io.WriteString(c, head+`{"phase":"`)
		chunk := bytes.Repeat([]byte("x"), 64<<10)
		for {
			if _, err := c.Write(chunk); err != nil {
				return // the client closed
			}
		}
	}()
	return path, stopped
}

// totalAlloc returns the bytes allocated by f (runtime.MemStats.TotalAlloc;
// the process's other goroutines allocate next to nothing meanwhile).
func totalAlloc(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// maxFrameAlloc is what reading one frame may allocate at most: the
// decoder's buffer grows by doubling to hold up to two frame limits.
const maxFrameAlloc = 8 * maxReply

// A socket that streams one endless frame ends a watch with an error that
// says so, whether it comes first or after a good frame, and within
// bounded memory; the same for a one-shot status.
func TestClientEndlessFrame(t *testing.T) {
	for _, tc := range []struct{ name, head string }{
		{"first frame", ""},
		{"after a snapshot", `{"phase":"serving"}` + "\n"},
	} {
		t.Run("watch "+tc.name, func(t *testing.T) {
			path, stopped := endlessSocket(t, tc.head)
			var err error
			var shown int
			start := time.Now()
			alloc := totalAlloc(func() {
				_, err = Watch(path, 50*time.Millisecond, 5*time.Second, func(Snapshot) error { shown++; return nil })
			})
			t.Logf("Watch returned after %v, %d snapshots shown, %.1f MiB allocated: %v", time.Since(start), shown, float64(alloc)/(1<<20), err)
			if err == nil || errors.Is(err, ErrGone) || !strings.Contains(err.Error(), "longer than 1024 KiB") {
				t.Errorf("Watch = %v, want an error saying the snapshot is too long", err)
			}
			if alloc > maxFrameAlloc {
				t.Errorf("Watch allocated %d bytes reading an endless frame, want at most %d", alloc, maxFrameAlloc)
			}
			select {
			case <-stopped:
			case <-time.After(5 * time.Second):
				t.Error("the fake socket still writes 5s after Watch returned: the connection was not closed")
			}
		})
	}
	t.Run("status", func(t *testing.T) {
		path, stopped := endlessSocket(t, "")
		var err error
		alloc := totalAlloc(func() { _, err = Fetch(path, 5*time.Second) })
		t.Logf("Fetch: %.1f MiB allocated: %v", float64(alloc)/(1<<20), err)
		if err == nil || !strings.Contains(err.Error(), "longer than 1024 KiB") {
			t.Errorf("Fetch = %v, want an error saying the snapshot is too long", err)
		}
		if alloc > maxFrameAlloc {
			t.Errorf("Fetch allocated %d bytes reading an endless reply, want at most %d", alloc, maxFrameAlloc)
		}
		select {
		case <-stopped:
		case <-time.After(5 * time.Second):
			t.Error("the fake socket still writes 5s after Fetch returned")
		}
	})
}
