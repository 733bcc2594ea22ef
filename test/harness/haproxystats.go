package harness

import (
	"bufio"
	"encoding/csv"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
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
