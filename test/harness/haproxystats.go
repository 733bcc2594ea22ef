package harness

import (
	"bufio"
	"encoding/csv"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"time"
)

// ServerStates asks an HAProxy's stats socket `show stat` and returns the
// status column (UP, DOWN, "UP 1/3", MAINT, …) of every server of backend:
// how the tests' load balancers say which servers they send to.
func ServerStates(statsSocket, backend string) (map[string]string, error) {
	conn, err := net.DialTimeout("unix", statsSocket, time.Second)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(time.Second))
	if _, err := io.WriteString(conn, "show stat\n"); err != nil {
		return nil, err
	}
	r := csv.NewReader(bufio.NewReader(conn))
	r.FieldsPerRecord = -1
	rows, err := r.ReadAll()
	if err != nil || len(rows) == 0 {
		return nil, fmt.Errorf("show stat: %v (%d rows)", err, len(rows))
	}
	head := rows[0]
	head[0] = strings.TrimPrefix(head[0], "# ")
	col := func(name string) int { return slices.Index(head, name) }
	px, sv, status := col("pxname"), col("svname"), col("status")
	if px < 0 || sv < 0 || status < 0 {
		return nil, fmt.Errorf("show stat: no pxname/svname/status in %v", head)
	}
	out := map[string]string{}
	for _, row := range rows[1:] {
		if len(row) > status && row[px] == backend && row[sv] != "BACKEND" {
			out[row[sv]] = row[status]
		}
	}
	return out, nil
}

// ServerWatch follows the servers of one backend of an HAProxy, from its
// stats socket every 50 ms: when each was last marked down, and whether it
// is up.
type ServerWatch struct {
	mu   sync.Mutex
	down map[string]time.Time // server → when first seen DOWN since it was last UP
	up   map[string]bool
}

// WatchServers starts a ServerWatch of backend on statsSocket; stop ends
// it and returns once its goroutine has.
func WatchServers(statsSocket, backend string) (w *ServerWatch, stop func()) {
	w = &ServerWatch{down: map[string]time.Time{}, up: map[string]bool{}}
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			if states, err := ServerStates(statsSocket, backend); err == nil {
				w.record(states, time.Now())
			}
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	return w, func() { close(done); <-finished }
}

func (w *ServerWatch) record(states map[string]string, now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for srv, st := range states {
		switch {
		case strings.HasPrefix(st, "UP") && !strings.Contains(st, "going down"):
			w.up[srv] = true
			delete(w.down, srv)
		case strings.HasPrefix(st, "DOWN"):
			if _, seen := w.down[srv]; !seen {
				w.down[srv] = now
			}
			w.up[srv] = false
		}
	}
}

// DownAt is when server was marked down, zero while it has not been since
// it was last up.
func (w *ServerWatch) DownAt(server string) time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.down[server]
}

// Up says whether server was up at the last reading.
func (w *ServerWatch) Up(server string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.up[server]
}
