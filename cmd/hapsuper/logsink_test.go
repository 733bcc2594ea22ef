package main

import (
	"bytes"
	"fmt"
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
// dropped and counted, every one of them in a count written by Close at
// the latest; Close writes what was queued.
func TestLogSinkNeverBlocks(t *testing.T) {
	w := &blockingWriter{release: make(chan struct{})}
	s := newLogSink(w)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 3*logQueueLines; i++ {
			s.Write([]byte("line\n"))
		}
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Write blocked behind a stalled reader")
	}
	close(w.release)
	for end := time.Now().Add(5 * time.Second); len(s.lines.ch) > 0 && time.Now().Before(end); {
		time.Sleep(time.Millisecond)
	}
	s.Write([]byte("after\n"))
	s.Close()
	out := w.String()
	n := strings.Count(out, "line\n")
	if n < logQueueLines || n > logQueueLines+1 {
		t.Errorf("%d lines written, want the %d queued (and the one being written)", n, logQueueLines)
	}
	// Every line is either written or counted as dropped. The counts are
	// written at most once per logDropReport, and by Close: a count made
	// while the reader stalled is followed by the next one only then.
	dropped := 0
	for _, l := range strings.Split(out, "\n") {
		if rest, ok := strings.CutPrefix(l, "hapsuper: "); ok {
			var k int
			if _, err := fmt.Sscanf(rest, "%d log lines dropped: stderr was not read fast enough", &k); err == nil {
				dropped += k
			}
		}
	}
	if n+dropped != 3*logQueueLines {
		t.Errorf("%d lines written and %d counted as dropped, want %d in all: ...%q", n, dropped, 3*logQueueLines, out[max(0, len(out)-200):])
	}
	if !strings.Contains(out, "after\n") {
		t.Errorf("the line written once the reader read again is missing: ...%q", out[max(0, len(out)-200):])
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
		for range 300 { // 30 MB, well within logQueueLines lines
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

// slowWriter takes every line, each after a pause, as a log reader that
// keeps up with hapsuper but not with a flood does.
type slowWriter struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (w *slowWriter) Write(p []byte) (int, error) {
	time.Sleep(20 * time.Microsecond)
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

func (w *slowWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// A companion that floods its output (`yes`) loses its own lines, never
// hapsuper's: every hapsuper line, written at its own pace throughout the
// flood, reaches the reader in order; the companion's lines are dropped
// and counted by source before the next line that gets through.
func TestLogSinkCompanionFloodDropsTheCompanionsFirst(t *testing.T) {
	w := &slowWriter{}
	s := newLogSink(w)
	comp := s.Companion()
	stop := make(chan struct{})
	flooded := make(chan int)
	go func() {
		n := 0
		for {
			select {
			case <-stop:
				flooded <- n
				return
			default:
			}
			comp.Write([]byte("y\n"))
			n++
		}
	}()
	const own = 200
	for i := range own {
		s.Write([]byte("hapsuper " + strconv.Itoa(i) + "\n"))
		time.Sleep(time.Millisecond)
	}
	close(stop)
	n := <-flooded
	// The writer may lag on a loaded machine: Close bounds its flush, so
	// wait (bounded) for hapsuper's last line first.
	last := "hapsuper " + strconv.Itoa(own-1) + "\n"
	for end := time.Now().Add(30 * time.Second); !strings.Contains(w.String(), last) && time.Now().Before(end); {
		time.Sleep(10 * time.Millisecond)
	}
	s.Close()
	out := w.String()
	next := 0
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "hapsuper ") && !strings.HasPrefix(l, "hapsuper: ") {
			if l != "hapsuper "+strconv.Itoa(next) {
				t.Fatalf("hapsuper line %q, want %q: its lines are lost or reordered", l, "hapsuper "+strconv.Itoa(next))
			}
			next++
		}
	}
	if next != own {
		t.Fatalf("%d of %d hapsuper lines written", next, own)
	}
	var ownDropped, compDropped int
	for _, l := range strings.Split(out, "\n") {
		var total, o, c int
		if _, err := fmt.Sscanf(l, "hapsuper: %d log lines dropped: stderr was not read fast enough (hapsuper's: %d, the companion's: %d)", &total, &o, &c); err == nil {
			ownDropped += o
			compDropped += c
		}
	}
	written := strings.Count(out, "y\n")
	t.Logf("flood: the companion wrote %d lines, %d reached the reader, %d counted dropped; hapsuper's: %d written, %d dropped", n, written, compDropped, next, ownDropped)
	if ownDropped != 0 || compDropped == 0 {
		t.Errorf("dropped hapsuper's %d, the companion's %d; want none of hapsuper's and some of the companion's", ownDropped, compDropped)
	}
}
