package harness

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// Entry is one line of hapsuper's output. JSON lines (--log-format json)
// carry msg, level and fields; any other line (HAProxy's own alerts, the Go
// runtime's traces) is kept as raw text only.
type Entry struct {
	At     time.Time      // the line's "time" field (hapsuper's clock, the same host), or when it was read
	Msg    string         // the line's msg
	Level  string         // the line's level
	Fields map[string]any // every field of the line, msg and time included; nil when not JSON
	Raw    string         // the line as written
}

// Str returns field key as text, or "" when it is missing.
func (e Entry) Str(key string) string {
	if v, ok := e.Fields[key]; ok {
		return fmt.Sprint(v)
	}
	return ""
}

// Num returns a numeric field, and whether it was one.
func (e Entry) Num(key string) (float64, bool) {
	v, ok := e.Fields[key].(float64)
	return v, ok
}

// Log collects a process's output, every line in order. The zero value is
// ready to use; it is safe for concurrent use.
type Log struct {
	mu      sync.Mutex
	lines   []Entry
	changed chan struct{} // closed and replaced on every new line; made on first use
	eof     chan struct{} // closed when Read has reached EOF; made on first use
}

// chans returns the channel closed at the next line and the one closed at
// EOF.
func (h *Log) chans() (changed, eof chan struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.changed == nil {
		h.changed = make(chan struct{})
	}
	if h.eof == nil {
		h.eof = make(chan struct{})
	}
	return h.changed, h.eof
}

// Read consumes r until EOF, then closes it. A process's output is best
// read from a plain os.Pipe whose write end the process (and HAProxy, which
// inherits it) holds: EOF then means every writer is gone.
func (h *Log) Read(r io.ReadCloser) {
	_, eof := h.chans()
	defer close(eof)
	defer r.Close()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		e := Entry{At: time.Now(), Raw: sc.Text()}
		var f map[string]any
		if json.Unmarshal(sc.Bytes(), &f) == nil {
			e.Fields = f
			e.Msg, e.Level = e.Str("msg"), e.Str("level")
			if ts, err := time.Parse(time.RFC3339Nano, e.Str("time")); err == nil {
				e.At = stampAt(ts, e.At)
			}
		}
		h.mu.Lock()
		h.lines = append(h.lines, e)
		if h.changed != nil {
			close(h.changed)
		}
		h.changed = make(chan struct{})
		h.mu.Unlock()
	}
}

// stampAt is the instant of a line stamped ts (the writer's wall clock)
// and read at arrival (time.Now: wall and monotonic). Where the stamp is
// the arrival's wall reading less the pipe's delay (under a second), it is
// that much before arrival on the monotonic clock too, so that the line's
// instant compares with the test's own time.Now readings even when the wall
// clock steps (a paused VM's clock is stepped forward on resume: 23 s once).
// Otherwise (a step between stamp and arrival, lines written long before)
// the stamp alone.
func stampAt(ts, arrival time.Time) time.Time {
	lag := arrival.Round(0).Sub(ts) // Round(0): the wall reading alone
	if lag < 0 || lag >= time.Second {
		return ts
	}
	return arrival.Add(-lag)
}

// WaitRead waits, at most timeout, until Read has consumed all the output
// (EOF: the process and every child holding its output are gone). A process
// that has exited may still have lines in the pipe: read them before looking
// for its last lines. It reports whether EOF was reached.
func (h *Log) WaitRead(timeout time.Duration) bool {
	_, eof := h.chans()
	select {
	case <-eof:
		return true
	case <-time.After(timeout):
		return false
	}
}

// Lines returns every line so far.
func (h *Log) Lines() []Entry {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Entry(nil), h.lines...)
}

// Find returns the first line with msg for which match (nil: any) holds.
func (h *Log) Find(msg string, match func(Entry) bool) (Entry, bool) {
	return h.first(func(e Entry) bool { return e.Msg == msg && (match == nil || match(e)) })
}

func (h *Log) first(keep func(Entry) bool) (Entry, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, e := range h.lines {
		if keep(e) {
			return e, true
		}
	}
	return Entry{}, false
}

// All returns every line with msg.
func (h *Log) All(msg string) []Entry {
	var out []Entry
	for _, e := range h.Lines() {
		if e.Msg == msg {
			out = append(out, e)
		}
	}
	return out
}

// Wait waits, at most timeout, for Find(msg, match), or until gone closes
// (nil: never; then one last look once the output is read).
func (h *Log) Wait(msg string, match func(Entry) bool, timeout time.Duration, gone <-chan struct{}) (Entry, bool) {
	return h.wait(func(e Entry) bool { return e.Msg == msg && (match == nil || match(e)) }, timeout, gone)
}

// WaitRaw waits, at most timeout, for the first line that starts with
// prefix, JSON or not.
func (h *Log) WaitRaw(prefix string, timeout time.Duration) (Entry, bool) {
	return h.wait(func(e Entry) bool { return strings.HasPrefix(e.Raw, prefix) }, timeout, nil)
}

func (h *Log) wait(keep func(Entry) bool, timeout time.Duration, gone <-chan struct{}) (Entry, bool) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		changed, _ := h.chans()
		if e, ok := h.first(keep); ok {
			return e, true
		}
		select {
		case <-changed:
		case <-deadline.C:
			return Entry{}, false
		case <-gone:
			h.WaitRead(time.Second) // the last lines may still be in the pipe
			return h.first(keep)
		}
	}
}

// Tail returns the last n lines.
func (h *Log) Tail(n int) string {
	lines := h.Lines()
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	var b strings.Builder
	for i, e := range lines {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(e.Raw)
	}
	return b.String()
}

// String returns every line, each ended by a newline.
func (h *Log) String() string {
	var b strings.Builder
	for _, e := range h.Lines() {
		b.WriteString(e.Raw + "\n")
	}
	return b.String()
}

// Warnings returns the msg and err of every WARN or ERROR line.
func (h *Log) Warnings() []string {
	var out []string
	for _, e := range h.Lines() {
		if e.Level == "WARN" || e.Level == "ERROR" {
			out = append(out, e.Msg+": "+e.Str("err"))
		}
	}
	return out
}
