package status

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"time"
)

const maxReply = 1 << 20 // a snapshot is a few KiB; anything larger is not ours

// Fetch asks the status socket at path for a snapshot, within timeout.
func Fetch(path string, timeout time.Duration) (Snapshot, error) {
	conn, err := net.DialTimeout("unix", path, timeout)
	if err != nil {
		return Snapshot{}, fmt.Errorf("connect to status socket %s: %w (is hapsuper running? pass --socket if it uses another path)", path, err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(timeout))
	if _, err := io.WriteString(conn, "status\n"); err != nil {
		return Snapshot{}, fmt.Errorf("send status request to %s: %w", path, err)
	}
	var s Snapshot
	if err := json.NewDecoder(io.LimitReader(conn, maxReply)).Decode(&s); err != nil {
		return Snapshot{}, fmt.Errorf("read status reply from %s: %w", path, err)
	}
	if s.Error != "" {
		return Snapshot{}, fmt.Errorf("status socket %s: %s", path, s.Error)
	}
	return s, nil
}

// ErrGone is returned by Watch when the supervisor went away after at least
// one snapshot was shown: the normal end of a watch.
var ErrGone = errors.New("supervisor exited")
