package supervisor

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// The companion's output becomes records named by their source, its lines
// as they are (no HAProxy tag read: an "[ALERT]" of the companion's stays
// in the line, at info); the relay stops on its stop channel, since
// hapsuper keeps the write end open for the restarts.
func TestCompanionRelayJSON(t *testing.T) {
	var out lockedBuffer
	r, err := newCompanionRelay(&out, true, slog.New(slog.NewJSONHandler(&out, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer r.w.Close()
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { r.run(stop); close(done) }()
	r.w.Write([]byte("I1204 controller started\n[ALERT] (3) : not haproxy's\n"))
	deadline := time.Now().Add(5 * time.Second)
	for strings.Count(out.String(), "\n") < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	close(stop)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the relay did not stop")
	}
	var recs []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("not JSON: %q", l)
		}
		recs = append(recs, m)
	}
	if len(recs) != 2 || recs[0]["msg"] != "companion" || recs[0]["source"] != "companion" || recs[0]["line"] != "I1204 controller started" ||
		recs[1]["level"] != "INFO" || recs[1]["line"] != "[ALERT] (3) : not haproxy's" {
		t.Errorf("records %v", recs)
	}
}

// lockedBuffer is a buffer the relay writes while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// shareOutput is a log output with a share of its own for the companion.
type shareOutput struct{ own, companion lockedBuffer }

func (s *shareOutput) Write(p []byte) (int, error) { return s.own.Write(p) }
func (s *shareOutput) Companion() io.Writer        { return &s.companion }

// With a log output that has a share for the companion (hapsuper's log
// sink), the companion's lines go to that share, as records (JSON logs)
// or as they are (text), and none to hapsuper's own; hapsuper's level
// still decides whether its records are written.
func TestCompanionRelayUsesItsShare(t *testing.T) {
	for _, c := range []struct {
		json  bool
		level slog.Level
		want  string
	}{
		{true, slog.LevelInfo, `"source":"companion","line":"from the controller"`},
		{false, slog.LevelInfo, "from the controller\n"},
		{true, slog.LevelWarn, ""},
	} {
		out := &shareOutput{}
		log := slog.New(slog.NewJSONHandler(out, &slog.HandlerOptions{Level: c.level}))
		r, err := newCompanionRelay(out, c.json, log)
		if err != nil {
			t.Fatal(err)
		}
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() { r.run(stop); close(done) }()
		r.w.Write([]byte("from the controller\n"))
		r.w.Close()
		for end := time.Now().Add(5 * time.Second); c.want != "" && out.companion.String() == "" && time.Now().Before(end); {
			time.Sleep(10 * time.Millisecond)
		}
		close(stop)
		<-done
		if got := out.companion.String(); (c.want == "" && got != "") || !strings.Contains(got, c.want) {
			t.Errorf("json %v level %v: the companion's share got %q, want %q", c.json, c.level, got, c.want)
		}
		if got := out.own.String(); got != "" {
			t.Errorf("json %v: hapsuper's own output got %q", c.json, got)
		}
	}
}
