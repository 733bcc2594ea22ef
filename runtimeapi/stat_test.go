package runtimeapi

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestParseShowStat(t *testing.T) {
	multi, err := splitOutputs(fixture(t, "sample-multi.txt"), 4)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		output string
		want   []Frontend
	}{
		{"current worker", mustOne(t, fixture(t, "show-stat.txt")), []Frontend{
			{Name: "web", Mode: "http", Status: "OPEN", Stot: 5, ReqTot: 5, ConnTot: 5, HasConnTot: true},
			{Name: "rawtcp", Mode: "tcp", Status: "OPEN", Stot: 2, ConnTot: 2, HasConnTot: true},
		}},
		{"old worker after reload", multi[3], []Frontend{
			{Name: "web", Mode: "http", Status: "STOP", Scur: 1, Stot: 6, ReqTot: 6, ConnTot: 6, HasConnTot: true},
			{Name: "rawtcp", Mode: "tcp", Status: "STOP", Scur: 1, Stot: 3, ConnTot: 3, HasConnTot: true},
		}},
		{"columns in another order", reorderColumns(mustOne(t, fixture(t, "show-stat.txt"))), []Frontend{
			{Name: "web", Mode: "http", Status: "OPEN", Stot: 5, ReqTot: 5, ConnTot: 5, HasConnTot: true},
			{Name: "rawtcp", Mode: "tcp", Status: "OPEN", Stot: 2, ConnTot: 2, HasConnTot: true},
		}},
		{"no conn_tot column", strings.Replace(mustOne(t, fixture(t, "show-stat.txt")), ",conn_tot,", ",conn_total,", 1), []Frontend{
			{Name: "web", Mode: "http", Status: "OPEN", Stot: 5, ReqTot: 5},
			{Name: "rawtcp", Mode: "tcp", Status: "OPEN", Stot: 2},
		}},
		{"header only", strings.SplitAfter(mustOne(t, fixture(t, "show-stat.txt")), "\n")[0], []Frontend{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseShowStat(tc.output)
			if err != nil || !slices.Equal(got, tc.want) {
				t.Fatalf("parseShowStat = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

func TestParseShowStatErrors(t *testing.T) {
	good := mustOne(t, fixture(t, "show-stat.txt"))
	cases := []struct {
		name    string
		output  string
		wantIs  error
		wantMsg string
	}{
		{"no such proxy", mustOne(t, fixture(t, "error-no-proxy.txt")), ErrCLI, "No such proxy."},
		{"unknown command", mustOne(t, fixture(t, "error-unknown-worker.txt")), ErrCLI, "Unknown command"},
		{"show info instead", mustOne(t, fixture(t, "show-info.txt")), ErrCLI, "Name: HAProxy"},
		{"short row", strings.Replace(good, ",http,", ",", 1), nil, "row 1 has"},
		{"bad number", strings.Replace(good, "web,FRONTEND,,,0,", "web,FRONTEND,,,x,", 1), nil, "scur"},
		{"empty name", strings.Replace(good, "web,FRONTEND", ",FRONTEND", 1), nil, "empty pxname"},
	}
	for _, col := range statColumns {
		cases = append(cases, struct {
			name    string
			output  string
			wantIs  error
			wantMsg string
		}{"missing " + col, dropColumn(good, col), nil, `no "` + col + `" column`})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseShowStat(tc.output)
			if err == nil {
				t.Fatalf("parsed %+v, want an error", got)
			}
			if tc.wantIs != nil && !errors.Is(err, tc.wantIs) {
				t.Errorf("error %q does not wrap %v", err, tc.wantIs)
			}
			if !strings.Contains(err.Error(), tc.wantMsg) {
				t.Errorf("error %q does not say %q", err, tc.wantMsg)
			}
		})
	}
}

// csvRows splits a show stat output into header names and rows.
func csvRows(output string) [][]string {
	var rows [][]string
	for line := range strings.SplitSeq(strings.TrimSuffix(output, "\n"), "\n") {
		rows = append(rows, strings.Split(strings.TrimPrefix(line, "# "), ","))
	}
	return rows
}

func joinRows(rows [][]string) string {
	var b strings.Builder
	for i, r := range rows {
		if i == 0 {
			b.WriteString("# ")
		}
		b.WriteString(strings.Join(r, ",") + "\n")
	}
	return b.String()
}

// dropColumn removes the column named name from header and rows.
func dropColumn(output, name string) string {
	rows := csvRows(output)
	i := slices.Index(rows[0], name)
	for r := range rows {
		rows[r] = slices.Delete(rows[r], i, i+1)
	}
	return joinRows(rows)
}

// reorderColumns reverses the order of every column.
func reorderColumns(output string) string {
	rows := csvRows(output)
	for _, r := range rows {
		slices.Reverse(r)
	}
	return joinRows(rows)
}
