package k8s_test

import (
	"bufio"
	"encoding/json"
	"io"
	"strings"
	"sync"
	"time"
)

// logEntry is one JSON line of hapsuper's log.
type logEntry struct {
	at     time.Time // the line's own time (hapsuper's clock, the same host)
	msg    string
	fields map[string]any
}

func (l logEntry) str(key string) string {
	s, _ := l.fields[key].(string)
	return s
}

// hapLog collects hapsuper's output: JSON lines parsed, every line kept.
type hapLog struct {
	mu      sync.Mutex
	entries []logEntry
	lines   []string
}

func newHapLog() *hapLog { return &hapLog{} }

// read consumes r until EOF (hapsuper and HAProxy both closed it).
func (h *hapLog) read(r io.ReadCloser) {
	defer r.Close()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		var f map[string]any
		e := logEntry{}
		if json.Unmarshal([]byte(line), &f) == nil {
			e.fields = f
			e.msg, _ = f["msg"].(string)
			if ts, ok := f["time"].(string); ok {
				e.at, _ = time.Parse(time.RFC3339Nano, ts)
			}
		}
		h.mu.Lock()
		h.lines = append(h.lines, line)
		if e.fields != nil {
			h.entries = append(h.entries, e)
		}
		h.mu.Unlock()
	}
}

// find returns the first entry with msg for which match (nil: any) holds.
func (h *hapLog) find(msg string, match func(logEntry) bool) (logEntry, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, e := range h.entries {
		if e.msg == msg && (match == nil || match(e)) {
			return e, true
		}
	}
	return logEntry{}, false
}

// all returns every entry with msg.
func (h *hapLog) all(msg string) []logEntry {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []logEntry
	for _, e := range h.entries {
		if e.msg == msg {
			out = append(out, e)
		}
	}
	return out
}

// wait polls for find(msg, match) until timeout, or until gone closes
// (then one last look).
func (h *hapLog) wait(msg string, match func(logEntry) bool, timeout time.Duration, gone <-chan struct{}) (logEntry, bool) {
	deadline := time.After(timeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if e, ok := h.find(msg, match); ok {
			return e, true
		}
		select {
		case <-deadline:
			return logEntry{}, false
		case <-gone:
			time.Sleep(50 * time.Millisecond) // the last lines may still be in the pipe
			return h.find(msg, match)
		case <-tick.C:
		}
	}
}

// tail returns the last n lines.
func (h *hapLog) tail(n int) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	lines := h.lines
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// warnings returns the msg and err of every WARN or ERROR entry.
func (h *hapLog) warnings() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, e := range h.entries {
		if lvl := e.str("level"); lvl == "WARN" || lvl == "ERROR" {
			out = append(out, e.msg+": "+e.str("err"))
		}
	}
	return out
}
