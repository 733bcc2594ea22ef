package supervisor

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"
)

// stderrRelay carries HAProxy's stderr (its own [NOTICE], [WARNING] and
// [ALERT] lines; its traffic logs go where its config says, stdout
// untouched) into hapsuper's log: written as they are to raw when it is
// set (text logs), else as records of hapsuper's logger, one format for a
// log pipeline (JSON logs). Either way it goes through hapsuper's log
// sink, which never blocks: HAProxy writes its stderr with blocking
// writes, and a stalled log reader would otherwise freeze the master that
// has to take the soft stop.
type stderrRelay struct {
	r, w *os.File
	raw  io.Writer    // nil: records of log
	log  *slog.Logger // with source=haproxy
	// record writes one line as a record of log when raw is nil; nil:
	// HAProxy's lines, read by parseHAProxyLine.
	record func(line []byte)
	// stopLines takes the workers' stop lines for the loop (stopline.go);
	// nil: none taken.
	stopLines chan<- workerStop
}

// maxStderrLine bounds one relayed line; the rest of a longer one is cut.
const maxStderrLine = 16 << 10

// relayDrain bounds how long the relay reads what is left once the loop
// has ended (HAProxy's last lines).
const relayDrain = 200 * time.Millisecond

func newStderrRelay(raw io.Writer, log *slog.Logger) (*stderrRelay, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	return &stderrRelay{r: r, w: w, raw: raw, log: log.With("source", "haproxy")}, nil
}

// started closes hapsuper's copy of the write end: the pipe then ends when
// every HAProxy process has.
func (s *stderrRelay) started() { s.w.Close() }

// run relays lines until the pipe ends (HAProxy's processes may close
// their stderr long before they exit), or until stop is closed and
// relayDrain more has passed; it returns once stop is closed, so that the
// end of HAProxy's stderr does not end the group it runs in.
func (s *stderrRelay) run(stop <-chan struct{}) error {
	s.relay(stop)
	<-stop
	return nil
}

func (s *stderrRelay) relay(stop <-chan struct{}) {
	defer s.r.Close()
	done := make(chan struct{})
	defer close(done)
	go func() { // the read's deadline is its stop path
		select {
		case <-stop:
			s.r.SetReadDeadline(time.Now().Add(relayDrain))
		case <-done:
		}
	}()
	br := bufio.NewReaderSize(s.r, 4096)
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if len(line) < maxStderrLine {
			line = append(line, chunk[:min(len(chunk), maxStderrLine-len(line))]...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if len(line) > 0 {
			s.emit(bytes.TrimRight(line, "\r\n"))
			line = line[:0]
		}
		if err != nil {
			return // EOF, a deadline, or the pipe closed
		}
	}
}

// emit writes one line of HAProxy's.
func (s *stderrRelay) emit(line []byte) {
	s.noteStop(line)
	if s.raw != nil {
		_, _ = s.raw.Write(append(line, '\n'))
		return
	}
	if s.record != nil {
		s.record(line)
		return
	}
	level, pid, msg := parseHAProxyLine(line)
	attrs := []slog.Attr{slog.String("line", msg)}
	if pid != 0 {
		attrs = append(attrs, slog.Int("pid", pid))
	}
	s.log.LogAttrs(context.Background(), level, "haproxy", attrs...)
}

// parseHAProxyLine reads "[ALERT]    (12) : text": the level of its tag
// (ALERT error, WARNING warn, others info), the pid and the text; a line
// of another shape is info, as it is.
func parseHAProxyLine(line []byte) (slog.Level, int, string) {
	s := string(line)
	level := slog.LevelInfo
	for _, t := range []struct {
		tag   string
		level slog.Level
	}{{"[ALERT]", slog.LevelError}, {"[WARNING]", slog.LevelWarn}, {"[NOTICE]", slog.LevelInfo}} {
		if rest, ok := strings.CutPrefix(s, t.tag); ok {
			level, s = t.level, strings.TrimLeft(rest, " ")
			break
		}
	}
	if rest, ok := strings.CutPrefix(s, "("); ok {
		if p, after, ok := strings.Cut(rest, ") : "); ok {
			if pid, err := strconv.Atoi(p); err == nil {
				return level, pid, after
			}
		}
	}
	return level, 0, s
}
