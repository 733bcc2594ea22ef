package supervisor

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strings"

	"github.com/hapsuper/hapsuper/status"
)

// notifyEvent is one sd_notify state HAProxy reported under -Ws.
type notifyEvent string

const (
	notifyReady     notifyEvent = "READY=1"
	notifyReloading notifyEvent = "RELOADING=1"
	notifyStopping  notifyEvent = "STOPPING=1"
)

// notifyListener receives HAProxy's sd_notify datagrams on NOTIFY_SOCKET.
type notifyListener struct {
	conn *net.UnixConn
	path string
}

func listenNotify(path string) (*notifyListener, error) {
	if err := status.RemoveStaleSocket(path); err != nil {
		return nil, fmt.Errorf("notify socket: %w", err)
	}
	conn, err := status.Private(func() (*net.UnixConn, error) {
		return net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	})
	if err != nil {
		return nil, fmt.Errorf("listen on notify socket %s: %w", path, err)
	}
	return &notifyListener{conn: conn, path: path}, nil
}

// run delivers events until close. A datagram may carry several lines.
func (n *notifyListener) run(events chan<- notifyEvent, done <-chan struct{}) error {
	buf := make([]byte, 4096)
	for {
		k, _, err := n.conn.ReadFromUnix(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return fmt.Errorf("read notify socket %s: %w", n.path, err)
		}
		for line := range strings.SplitSeq(string(buf[:k]), "\n") {
			switch ev := notifyEvent(strings.TrimSpace(line)); ev {
			case notifyReady, notifyReloading, notifyStopping:
				select {
				case events <- ev:
				case <-done:
					return nil
				}
			}
		}
	}
}

func (n *notifyListener) close() {
	n.conn.Close()
	os.Remove(n.path)
}
