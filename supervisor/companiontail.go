package supervisor

import (
	"bytes"
	"io"
	"sync"
)

// companionTailLines is how many of the companion's last output lines
// status shows when it is failing.
const companionTailLines = 5

// maxTailLine bounds one kept line.
const maxTailLine = 300

// lineTail keeps the last lines the companion wrote, for status: the relay
// adds them from its goroutine, the loop reads them.
type lineTail struct {
	mu    sync.Mutex
	lines []string // the last companionTailLines, oldest first
}

// add keeps line, dropping the oldest beyond companionTailLines.
func (t *lineTail) add(line []byte) {
	s := truncate(string(bytes.TrimRight(line, "\r\n")), maxTailLine)
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.lines) == companionTailLines {
		copy(t.lines, t.lines[1:])
		t.lines = t.lines[:companionTailLines-1]
	}
	t.lines = append(t.lines, s)
}

// last returns a copy of the lines kept; nil for a nil tail.
func (t *lineTail) last() []string {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]string(nil), t.lines...)
}

// hook has relay keep each line it carries in t, whichever way it writes
// it (as it is to raw, or as a record).
func (t *lineTail) hook(relay *stderrRelay) {
	if raw := relay.raw; raw != nil {
		relay.raw = tailWriter{t: t, w: raw}
	}
	if record := relay.record; record != nil {
		relay.record = func(line []byte) {
			t.add(line)
			record(line)
		}
	}
}

// tailWriter is the raw output of a relay, which writes one whole line per
// Write, kept in t as well.
type tailWriter struct {
	t *lineTail
	w io.Writer
}

func (w tailWriter) Write(p []byte) (int, error) {
	w.t.add(p)
	return w.w.Write(p)
}
