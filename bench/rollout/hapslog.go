package main

import (
	"bufio"
	"encoding/json"
	"io"
	"strings"
	"sync"
	"time"
)

// logLine is one JSON line of hapsuper's log (other lines keep only text).
type logLine struct {
	at     time.Time
	msg    string
	fields map[string]any
}

func (l logLine) str(key string) string {
	s, _ := l.fields[key].(string)
	return s
}

// procLog collects a pod process's output: every line, JSON ones parsed.
type procLog struct {
	mu    sync.Mutex
	lines []string
	json  []logLine
}

// read consumes r until EOF.
func (p *procLog) read(r io.ReadCloser) {
	defer r.Close()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		var f map[string]any
		var l logLine
		if json.Unmarshal([]byte(line), &f) == nil {
			l.fields = f
			l.msg, _ = f["msg"].(string)
			if ts, ok := f["time"].(string); ok {
				l.at, _ = time.Parse(time.RFC3339Nano, ts)
			}
		}
		p.mu.Lock()
		p.lines = append(p.lines, line)
		if l.fields != nil {
			p.json = append(p.json, l)
		}
		p.mu.Unlock()
	}
}

// find returns the first line with msg for which match (nil: any) holds.
func (p *procLog) find(msg string, match func(logLine) bool) (logLine, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, l := range p.json {
		if l.msg == msg && (match == nil || match(l)) {
			return l, true
		}
	}
	return logLine{}, false
}

// wait polls find until it succeeds, timeout passes, or gone closes.
func (p *procLog) wait(msg string, match func(logLine) bool, timeout time.Duration, gone <-chan struct{}) (logLine, bool) {
	deadline := time.After(timeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if l, ok := p.find(msg, match); ok {
			return l, true
		}
		select {
		case <-deadline:
			return logLine{}, false
		case <-gone:
			time.Sleep(50 * time.Millisecond)
			return p.find(msg, match)
		case <-tick.C:
		}
	}
}

// tail returns the last n lines.
func (p *procLog) tail(n int) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	lines := p.lines
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
