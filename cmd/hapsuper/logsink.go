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
// container. A failed write (EPIPE: the reader is gone) drops that line.
//
// hapsuper's own lines (HAProxy's stderr included) and the companion's
// (Companion) wait in two queues, each bounded in lines and bytes: a
// line that finds its queue full is dropped and counted by source. The
// writer takes hapsuper's lines first and the companion's only when none
// waits, so a companion that floods its output (a controller's debug log,
// `yes`) loses its own lines, never hapsuper's: those are dropped only
// when the reader is too slow for them alone. The counts are written
// before the next line that gets through, at most once per
// logDropReport (a flood would otherwise put one before every line), and
// at Close.
type logSink struct {
	w io.Writer
	// lines is hapsuper's queue, companion the companion's.
	lines, companion *logShare
	closed           atomic.Bool
	done             chan struct{}
	once             sync.Once
	reported         time.Time // when the counts were last written (run's)
}

// logDropReport is how often, at most, the dropped lines are counted in
// the output.
const logDropReport = time.Second

// The queues' shares (docs/failure-modes.md): hapsuper's lines are ~300 bytes;
// the bytes bound keeps a stalled reader from holding hundreds of MB when
// lines are long (the lines it holds, at most the line bound of any
// length, did). The companion's share is smaller: what it says past it
// is dropped first anyway.
const (
	logQueueLines          = 1024
	logQueueBytes          = 1 << 20
	companionLogQueueLines = 512
	companionLogQueueBytes = 256 << 10
)

// logFlushTimeout bounds how long Close waits for the queue to reach the
// reader at exit.
const logFlushTimeout = time.Second

// logShare is one source's share: lines and the bytes they hold, and the
// lines dropped since the last count written.
type logShare struct {
	ch       chan []byte
	maxBytes int64
	queued   atomic.Int64
	dropped  atomic.Int64
}

func newLogShare(lines int, bytes int64) *logShare {
	return &logShare{ch: make(chan []byte, lines), maxBytes: bytes}
}

// put queues a copy of p, or drops and counts it; it never blocks.
func (q *logShare) put(p []byte) {
	if q.queued.Add(int64(len(p))) > q.maxBytes {
		q.queued.Add(-int64(len(p)))
		q.dropped.Add(1)
		return
	}
	select {
	case q.ch <- append([]byte(nil), p...):
	default:
		q.queued.Add(-int64(len(p)))
		q.dropped.Add(1)
	}
}

func newLogSink(w io.Writer) *logSink {
	s := &logSink{w: w, lines: newLogShare(logQueueLines, logQueueBytes),
		companion: newLogShare(companionLogQueueLines, companionLogQueueBytes), done: make(chan struct{})}
	go s.run()
	return s
}

// Write queues a copy of p as hapsuper's; it never blocks. slog writes one
// whole line per call.
func (s *logSink) Write(p []byte) (int, error) {
	if !s.closed.Load() {
		s.lines.put(p)
	}
	return len(p), nil
}

// Companion returns the writer of the companion's lines: its own share of
// the queue, dropped first (the supervisor finds it by this method).
func (s *logSink) Companion() io.Writer { return companionWriter{s} }

type companionWriter struct{ s *logSink }

func (c companionWriter) Write(p []byte) (int, error) {
	if !c.s.closed.Load() {
		c.s.companion.put(p)
	}
	return len(p), nil
}

func (s *logSink) run() {
	defer close(s.done)
	for {
		var line []byte
		var from *logShare
		select { // hapsuper's first
		case line = <-s.lines.ch:
			from = s.lines
		default:
			select {
			case line = <-s.lines.ch:
				from = s.lines
			case line = <-s.companion.ch:
				from = s.companion
			}
		}
		if line == nil { // Close's mark: hapsuper's lines before it are written
			s.flushCompanion()
			s.reportDropped()
			return
		}
		s.write(line)
		from.queued.Add(-int64(len(line)))
	}
}

// flushCompanion writes the companion's lines still queued at Close.
func (s *logSink) flushCompanion() {
	for {
		select {
		case line := <-s.companion.ch:
			s.write(line)
			s.companion.queued.Add(-int64(len(line)))
		default:
			return
		}
	}
}

// write writes line, after the count of the lines dropped before it when
// logDropReport has passed since the last.
func (s *logSink) write(line []byte) {
	if time.Since(s.reported) >= logDropReport {
		s.reportDropped()
	}
	_, _ = s.w.Write(line)
}

// reportDropped writes the count of the lines dropped since the last, if
// any, by source.
func (s *logSink) reportDropped() {
	own, comp := s.lines.dropped.Swap(0), s.companion.dropped.Swap(0)
	if own+comp == 0 {
		return
	}
	s.reported = time.Now()
	_, _ = fmt.Fprintf(s.w, "hapsuper: %d log lines dropped: stderr was not read fast enough (hapsuper's: %d, the companion's: %d)\n", own+comp, own, comp)
}

// Close stops taking lines and waits, at most logFlushTimeout, for the
// queued ones to be written. Writes after Close are dropped.
func (s *logSink) Close() {
	s.once.Do(func() {
		s.closed.Store(true)
		timeout := time.NewTimer(logFlushTimeout)
		defer timeout.Stop()
		select {
		case s.lines.ch <- nil: // the channel is never closed: a racing Write must not panic
		case <-timeout.C:
			return
		}
		select {
		case <-s.done:
		case <-timeout.C:
		}
	})
}
