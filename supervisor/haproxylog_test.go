package supervisor

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestParseHAProxyLine(t *testing.T) {
	for _, tc := range []struct {
		line  string
		level slog.Level
		pid   int
		msg   string
	}{
		{"[ALERT]    (7161) : Binding [x.cfg:29] for frontend probe: cannot bind socket", slog.LevelError, 7161, "Binding [x.cfg:29] for frontend probe: cannot bind socket"},
		{"[WARNING]  (7169) : Paused frontend web.", slog.LevelWarn, 7169, "Paused frontend web."},
		{"[NOTICE]   (12) : haproxy version is 3.2.26-1", slog.LevelInfo, 12, "haproxy version is 3.2.26-1"},
		{"something else entirely", slog.LevelInfo, 0, "something else entirely"},
		{"[ALERT] no pid here", slog.LevelError, 0, "no pid here"},
	} {
		level, pid, msg := parseHAProxyLine([]byte(tc.line))
		if level != tc.level || pid != tc.pid || msg != tc.msg {
			t.Errorf("parseHAProxyLine(%q) = %v %d %q, want %v %d %q", tc.line, level, pid, msg, tc.level, tc.pid, tc.msg)
		}
	}
}

// What HAProxy writes to its stderr comes out as JSON records of the log,
// a line longer than maxStderrLine cut, and the relay ends when the pipe
// does.
func TestStderrRelayJSON(t *testing.T) {
	var out bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&out, nil))
	r, err := newStderrRelay(nil, log)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { r.relay(make(chan struct{})); close(done) }()
	r.w.Write([]byte("[ALERT]    (5) : bad\n[NOTICE]   (5) : fine\n" + strings.Repeat("x", 3*maxStderrLine) + "\nno newline at the end"))
	r.started() // the only writer closes
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the relay did not end with the pipe")
	}
	var recs []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("not JSON: %q", l)
		}
		recs = append(recs, m)
	}
	if len(recs) != 4 || recs[0]["level"] != "ERROR" || recs[0]["line"] != "bad" || recs[0]["pid"] != float64(5) ||
		recs[1]["level"] != "INFO" || len(recs[2]["line"].(string)) != maxStderrLine || recs[3]["line"] != "no newline at the end" {
		t.Errorf("records %v", recs)
	}
}
