package main

import (
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// logSink writes the supervisor's log lines to stderr from a goroutine of
// its own, so that a log reader that stalls (a full pipe) or goes away
// never blocks or ends the loop that decides the drain: as PID 1, a write
// that blocks freezes the drain, and one that raises SIGPIPE ends the
// container. The queue holds at most logQueue lines and logQueueBytes
// bytes: lines that find it full are dropped and counted; the count is
// written before the next line that gets through. A failed write (EPIPE:
// the reader is gone) drops that line.
type logSink struct {
	w       io.Writer
	lines   chan []byte
	queued  atomic.Int64 // bytes in lines
	dropped atomic.Int64
	closed  atomic.Bool
	done    chan struct{}
	once    sync.Once
}

// logQueue is how many lines, and logQueueBytes how many bytes, wait for a
// slow reader before lines are dropped. Lines are ~300 bytes; the bytes
// bound keeps a stalled reader from holding hundreds of MB when lines are
// long (the lines it holds, at most logQueue of any length, did).
const (
	logQueue      = 1024
	logQueueBytes = 1 << 20
)

// logFlushTimeout bounds how long Close waits for the queue to reach the
// reader at exit.
const logFlushTimeout = time.Second

func newLogSink(w io.Writer) *logSink {
	s := &logSink{w: w, lines: make(chan []byte, logQueue), done: make(chan struct{})}
	go s.run()
	return s
}

// Write queues a copy of p; it never blocks. slog writes one whole line per
// call.
func (s *logSink) Write(p []byte) (int, error) {
	if s.closed.Load() {
		return len(p), nil
	}
	if s.queued.Add(int64(len(p))) > logQueueBytes {
		s.queued.Add(-int64(len(p)))
		s.dropped.Add(1)
		return len(p), nil
	}
	line := append([]byte(nil), p...)
	select {
	case s.lines <- line:
	default:
		s.queued.Add(-int64(len(p)))
		s.dropped.Add(1)
	}
	return len(p), nil
}

func (s *logSink) run() {
	defer close(s.done)
	for line := range s.lines {
		if line == nil { // Close's mark: everything before it is written
			return
		}
		if n := s.dropped.Swap(0); n > 0 {
			_, _ = fmt.Fprintf(s.w, "hapsuper: %d log lines dropped: stderr was not read fast enough\n", n)
		}
		_, _ = s.w.Write(line)
		s.queued.Add(-int64(len(line)))
	}
}

// Close stops taking lines and waits, at most logFlushTimeout, for the
// queued ones to be written. Writes after Close are dropped.
func (s *logSink) Close() {
	s.once.Do(func() {
		s.closed.Store(true)
		timeout := time.NewTimer(logFlushTimeout)
		defer timeout.Stop()
		select {
		case s.lines <- nil: // the channel is never closed: a racing Write must not panic
		case <-timeout.C:
			return
		}
		select {
		case <-s.done:
		case <-timeout.C:
		}
	})
}
