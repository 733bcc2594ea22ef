package runtimeapi

import (
	"fmt"
	"strconv"
	"strings"
)

// Frontend is one FRONTEND row of `show stat -1 1 -1`.
type Frontend struct {
	Name   string
	Mode   string // "http", "tcp"
	Status string // OPEN, STOP, ...
	Scur   int64
	Stot   uint64
	ReqTot uint64 // 0 in tcp mode
	// ConnTot is conn_tot, the connections the frontend accepted (its
	// cum_conn, the count a worker's "Proxy … stopped (cumulated conns:
	// FE: n" line gives when it stops accepting); HasConnTot is false
	// when the header has no conn_tot column.
	ConnTot    uint64
	HasConnTot bool
}

// statColumns are the CSV columns parseShowStat reads, by header name.
var statColumns = []string{"pxname", "svname", "status", "scur", "stot", "req_tot", "mode"}

func statCommand(pid int) string { return fmt.Sprintf("@!%d show stat -1 1 -1", pid) }

// parseShowStat parses the CSV of `show stat`, keeping FRONTEND rows. Columns
// are found by the names of the header line ("# pxname,svname,..."); a
// missing one is an error naming it. Empty counters (req_tot in tcp mode) read 0.
func parseShowStat(output string) ([]Frontend, error) {
	lines := strings.Split(strings.TrimSuffix(output, "\n"), "\n")
	header, ok := strings.CutPrefix(lines[0], "# ")
	if !ok {
		return nil, unexpected(output, `"# pxname,..." CSV header`)
	}
	names := strings.Split(header, ",")
	col := make(map[string]int, len(statColumns))
	for _, want := range statColumns {
		i := indexOf(names, want)
		if i < 0 {
			return nil, fmt.Errorf("header has no %q column", want)
		}
		col[want] = i
	}
	if i := indexOf(names, "conn_tot"); i >= 0 {
		col["conn_tot"] = i
	}
	frontends := []Frontend{}
	for n, line := range lines[1:] {
		row := strings.Split(line, ",")
		if len(row) != len(names) {
			return nil, fmt.Errorf("row %d has %d fields, header has %d: %q", n+1, len(row), len(names), firstLine(line))
		}
		if row[col["svname"]] != "FRONTEND" {
			continue
		}
		fe, err := frontendRow(row, col)
		if err != nil {
			return nil, fmt.Errorf("row %d (%s): %w", n+1, clip(row[col["pxname"]]), err)
		}
		frontends = append(frontends, fe)
	}
	return frontends, nil
}

func frontendRow(row []string, col map[string]int) (Frontend, error) {
	fe := Frontend{Name: row[col["pxname"]], Mode: row[col["mode"]], Status: row[col["status"]]}
	if fe.Name == "" {
		return Frontend{}, fmt.Errorf("empty pxname")
	}
	var err error
	if fe.Scur, err = strconv.ParseInt(orZero(row[col["scur"]]), 10, 64); err != nil {
		return Frontend{}, fmt.Errorf("column scur: %q is not a number", clip(row[col["scur"]]))
	}
	if fe.Stot, err = strconv.ParseUint(orZero(row[col["stot"]]), 10, 64); err != nil {
		return Frontend{}, fmt.Errorf("column stot: %q is not a number", clip(row[col["stot"]]))
	}
	if fe.ReqTot, err = strconv.ParseUint(orZero(row[col["req_tot"]]), 10, 64); err != nil {
		return Frontend{}, fmt.Errorf("column req_tot: %q is not a number", clip(row[col["req_tot"]]))
	}
	if i, ok := col["conn_tot"]; ok {
		if fe.ConnTot, err = strconv.ParseUint(orZero(row[i]), 10, 64); err != nil {
			return Frontend{}, fmt.Errorf("column conn_tot: %q is not a number", clip(row[i]))
		}
		fe.HasConnTot = true
	}
	return fe, nil
}

func indexOf(names []string, want string) int {
	for i, n := range names {
		if n == want {
			return i
		}
	}
	return -1
}

func orZero(s string) string {
	if s == "" {
		return "0"
	}
	return s
}
