package main

import (
	"bytes"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// blockingWriter blocks every Write until release is closed, as a pipe
// whose reader stalled does.
type blockingWriter struct {
	release chan struct{}
	mu      sync.Mutex
	buf     bytes.Buffer
}

func (b *blockingWriter) Write(p []byte) (int, error) {
	<-b.release
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *blockingWriter) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// A stalled reader never blocks a Write: lines beyond the queue are
// dropped and counted, and the count is written once the reader reads
// again; Close writes what was queued.
func TestLogSinkNeverBlocks(t *testing.T) {
	w := &blockingWriter{release: make(chan struct{})}
	s := newLogSink(w)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 3*logQueue; i++ {
			s.Write([]byte("line\n"))
		}
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Write blocked behind a stalled reader")
	}
	close(w.release)
	for end := time.Now().Add(5 * time.Second); len(s.lines) > 0 && time.Now().Before(end); {
		time.Sleep(time.Millisecond)
	}
	s.Write([]byte("after\n"))
	s.Close()
	out := w.String()
	if n := strings.Count(out, "line\n"); n < logQueue || n > logQueue+1 {
		t.Errorf("%d lines written, want the %d queued (and the one being written)", n, logQueue)
	}
	if !strings.Contains(out, "log lines dropped: stderr was not read fast enough") || !strings.HasSuffix(out, "after\n") {
		t.Errorf("output does not count the dropped lines before the next one: ...%q", out[max(0, len(out)-200):])
	}
	s.Write([]byte("closed\n")) // after Close: dropped, no panic
}

// Close returns within its bound even when the reader never reads again.
func TestLogSinkCloseBounded(t *testing.T) {
	w := &blockingWriter{release: make(chan struct{})}
	defer close(w.release)
	s := newLogSink(w)
	s.Write([]byte("stuck\n"))
	start := time.Now()
	s.Close()
	if d := time.Since(start); d > logFlushTimeout+time.Second {
		t.Errorf("Close took %s, want at most %s", d, logFlushTimeout)
	}
}

// Long lines (a routing detail that quoted a node's whole status line was
// 316 KB) behind a stalled reader: the queue holds at most logQueueBytes
// of them, the rest are dropped and counted, and Write still never blocks.
func TestLogSinkBoundsBytes(t *testing.T) {
	w := &blockingWriter{release: make(chan struct{})}
	s := newLogSink(w)
	line := append(bytes.Repeat([]byte("x"), 100<<10), '\n')
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 300 { // 30 MB, well within logQueue lines
			s.Write(line)
		}
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Write blocked behind a stalled reader")
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	held := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("a stalled reader holds %d KiB of 300 lines of 100 KiB (bound %d KiB)", held>>10, logQueueBytes>>10)
	if held > 2*logQueueBytes {
		t.Errorf("%d bytes held for a stalled reader, want at most about %d", held, logQueueBytes)
	}
	close(w.release)
	s.Write([]byte("after\n"))
	s.Close()
	out := w.String()
	written := strings.Count(out, string(line))
	if written < 1 || written*len(line) > logQueueBytes+len(line) {
		t.Errorf("%d long lines written, want those within %d bytes", written, logQueueBytes)
	}
	if want := "hapsuper: " + strconv.Itoa(300-written) + " log lines dropped"; !strings.Contains(out, want) || !strings.HasSuffix(out, "after\n") {
		t.Errorf("output does not say %q before the next line: ...%q", want, out[max(0, len(out)-200):])
	}
}
