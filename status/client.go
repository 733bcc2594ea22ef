package status

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"reflect"
	"syscall"
	"time"

	"github.com/hapsuper/hapsuper/drain"
)

// maxReply bounds one snapshot as read, the one-shot reply and each frame
// of a watch: a snapshot is a few KiB; anything larger is not ours.
const maxReply = 1 << 20

// errFrameTooLarge ends a read of a snapshot longer than maxReply.
var errFrameTooLarge = fmt.Errorf("a snapshot longer than %d KiB: whatever answers is not hapsuper's status socket, or is broken", maxReply>>10)

// frameLimit lets a json.Decoder read at most maxReply bytes for each
// value it decodes: reset after each value, it fails the read beyond with
// errFrameTooLarge (not EOF, which would read as a connection that ended).
// The decoder reads ahead, so a frame may hold up to one limit's worth read
// with the frame before it: memory stays within a few times maxReply.
type frameLimit struct {
	r    io.Reader
	left int64
}

func newFrameLimit(r io.Reader) *frameLimit { return &frameLimit{r: r, left: maxReply} }

func (l *frameLimit) Read(p []byte) (int, error) {
	if l.left <= 0 {
		return 0, errFrameTooLarge
	}
	if int64(len(p)) > l.left {
		p = p[:l.left]
	}
	n, err := l.r.Read(p)
	l.left -= int64(n)
	return n, err
}

// next starts the budget of the next frame.
func (l *frameLimit) next() { l.left = maxReply }

// Fetch asks the status socket at path for a snapshot, within timeout.
func Fetch(path string, timeout time.Duration) (Snapshot, error) {
	conn, err := net.DialTimeout("unix", path, timeout)
	if err != nil {
		return Snapshot{}, fmt.Errorf("connect to status socket %s: %w (is hapsuper running? pass --status-socket if it uses another path)", path, err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(timeout))
	if _, err := io.WriteString(conn, "status\n"); err != nil {
		return Snapshot{}, fmt.Errorf("send status request to %s: %w", path, err)
	}
	var s Snapshot
	if err := json.NewDecoder(newFrameLimit(conn)).Decode(&s); err != nil {
		return Snapshot{}, fmt.Errorf("read status reply from %s: %w", path, err)
	}
	if s.Error != "" {
		return Snapshot{}, fmt.Errorf("status socket %s: %s", path, s.Error)
	}
	return s, nil
}

// ErrGone is returned by Watch when the connection ended before a snapshot
// of phase exited: the supervisor went away without saying how it ended
// (killed, or an older server that does not send its final snapshot).
var ErrGone = errors.New("the supervisor went away before it reported its exit")

// Watch asks the status socket at path for a snapshot every interval and
// calls show with each, until the supervisor exits: its server then sends
// the snapshot of its exit (phase exited, with the drain's reason) and
// closes. It returns the last snapshot shown, and nil when that one is of
// phase exited, ErrGone when the connection ended before one was, or the
// error of the exchange or of show. timeout bounds the connection and each
// wait beyond the interval.
func Watch(path string, interval, timeout time.Duration, show func(Snapshot) error) (Snapshot, error) {
	conn, err := net.DialTimeout("unix", path, timeout)
	if err != nil {
		return Snapshot{}, fmt.Errorf("connect to status socket %s: %w (is hapsuper running? pass --status-socket if it uses another path)", path, err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(timeout))
	if _, err := fmt.Fprintf(conn, "watch %s\n", interval); err != nil {
		return Snapshot{}, fmt.Errorf("send watch request to %s: %w", path, err)
	}
	frames := newFrameLimit(conn)
	dec := json.NewDecoder(frames)
	var last Snapshot
	for n := 0; ; n++ {
		var s Snapshot
		err := dec.Decode(&s)
		switch {
		case err != nil && n > 0 && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET)):
			if last.Phase == drain.Exited {
				return last, nil
			}
			return last, ErrGone
		case err != nil:
			return last, fmt.Errorf("read status from %s: %w", path, err)
		case s.Error != "":
			return last, fmt.Errorf("status socket %s: %s", path, s.Error)
		}
		frames.next()
		conn.SetDeadline(time.Now().Add(interval + timeout))
		if s.Phase == drain.Exited && last.Phase == drain.Exited && reflect.DeepEqual(s, last) {
			continue // the final snapshot again, sent as the server closed
		}
		if err := show(s); err != nil {
			return s, err
		}
		last = s
	}
}
