package harness

import (
	"bufio"
	"encoding/json"
	"io"
	"strings"
	"sync"
	"time"
)

// Entry is one JSON line of hapsuper's log.
type Entry struct {
	At     time.Time      // the line's own time (hapsuper's clock, the same host)
	Msg    string         // the line's msg
	Fields map[string]any // every field of the line, msg and time included
}

// Str returns the string field key, or "" when it is missing or not a string.
func (e Entry) Str(key string) string {
	s, _ := e.Fields[key].(string)
	return s
}

// Log collects a process's output: every line kept, JSON lines parsed.
// The zero value is ready to use; it is safe for concurrent use.
type Log struct {
	mu      sync.Mutex
	entries []Entry
	lines   []string
	eof     chan struct{} // closed when Read has reached EOF; made on first use
}

// read returns the channel closed at EOF.
func (h *Log) read() chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.eof == nil {
		h.eof = make(chan struct{})
	}
	return h.eof
}

// WaitRead waits, at most timeout, until Read has consumed all the output
// (EOF: the process and every child holding its output are gone). A process
// that has exited may still have lines in the pipe: read them before looking
// for its last lines. It reports whether EOF was reached.
func (h *Log) WaitRead(timeout time.Duration) bool {
	select {
	case <-h.read():
		return true
	case <-time.After(timeout):
		return false
	}
}

// Read consumes r until EOF, then closes it.
func (h *Log) Read(r io.ReadCloser) {
	eof := h.read()
	defer close(eof)
	defer r.Close()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		var f map[string]any
		e := Entry{}
		if json.Unmarshal([]byte(line), &f) == nil {
			e.Fields = f
			e.Msg, _ = f["msg"].(string)
			if ts, ok := f["time"].(string); ok {
				e.At, _ = time.Parse(time.RFC3339Nano, ts)
			}
		}
		h.mu.Lock()
		h.lines = append(h.lines, line)
		if e.Fields != nil {
			h.entries = append(h.entries, e)
		}
		h.mu.Unlock()
	}
}

// Find returns the first entry with msg for which match (nil: any) holds.
func (h *Log) Find(msg string, match func(Entry) bool) (Entry, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, e := range h.entries {
		if e.Msg == msg && (match == nil || match(e)) {
			return e, true
		}
	}
	return Entry{}, false
}

// All returns every entry with msg.
func (h *Log) All(msg string) []Entry {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []Entry
	for _, e := range h.entries {
		if e.Msg == msg {
			out = append(out, e)
		}
	}
	return out
}

// Wait polls for Find(msg, match) until timeout, or until gone closes
// (then one last look).
func (h *Log) Wait(msg string, match func(Entry) bool, timeout time.Duration, gone <-chan struct{}) (Entry, bool) {
	deadline := time.After(timeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if e, ok := h.Find(msg, match); ok {
			return e, true
		}
		select {
		case <-deadline:
			return Entry{}, false
		case <-gone:
			time.Sleep(50 * time.Millisecond) // the last lines may still be in the pipe
			return h.Find(msg, match)
		case <-tick.C:
		}
	}
}

// Tail returns the last n lines.
func (h *Log) Tail(n int) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	lines := h.lines
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Warnings returns the msg and err of every WARN or ERROR entry.
func (h *Log) Warnings() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, e := range h.entries {
		if lvl := e.Str("level"); lvl == "WARN" || lvl == "ERROR" {
			out = append(out, e.Msg+": "+e.Str("err"))
		}
	}
	return out
}
