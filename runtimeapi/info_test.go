package runtimeapi

import (
	"errors"
	"strings"
	"testing"
)

func TestParseShowInfo(t *testing.T) {
	multi, err := splitOutputs(fixture(t, "sample-multi.txt"), 4)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		output string
		pid    int
		want   Info
	}{
		{"current worker", mustOne(t, fixture(t, "show-info.txt")), 4006, Info{PID: 4006, CumConns: 10, CumReq: 10}},
		{"old worker with open connections", multi[2], 4006, Info{PID: 4006, Stopping: true, CurrConns: 2, CumConns: 28, CumReq: 28}},
		{"any pid", multi[0], 0, Info{PID: 4288, CumConns: 5, CumReq: 5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseShowInfo(tc.output, tc.pid)
			if err != nil || got != tc.want {
				t.Fatalf("parseShowInfo = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

func TestParseShowInfoErrors(t *testing.T) {
	good := mustOne(t, fixture(t, "show-info.txt"))
	for _, tc := range []struct {
		name    string
		output  string
		pid     int
		wantIs  error
		wantMsg string
	}{
		{"another pid", good, 4288, nil, "answer is for pid 4006, asked 4288"},
		{"missing CumReq", strings.Replace(good, "CumReq: 10\n", "", 1), 4006, nil, "no CumReq field"},
		{"missing Stopping", strings.Replace(good, "Stopping: 0\n", "", 1), 4006, nil, "no Stopping field"},
		{"not a number", strings.Replace(good, "CurrConns: 0", "CurrConns: many", 1), 4006, nil, "CurrConns"},
		{"unknown command", mustOne(t, fixture(t, "error-unknown-worker.txt")), 4288, ErrCLI, "Unknown command"},
		{"worker error text", mustOne(t, fixture(t, "error-no-proxy.txt")), 4288, ErrCLI, "No such proxy."},
		{"garbage", "\x00\x01binary\n", 4006, ErrCLI, "binary"},
		{"empty", "", 4006, nil, "empty output"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseShowInfo(tc.output, tc.pid)
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

// mustOne returns the single output of a one-command reply.
func mustOne(t *testing.T, reply string) string {
	t.Helper()
	out, err := splitOutputs(reply, 1)
	if err != nil {
		t.Fatalf("split one output: %v", err)
	}
	return out[0]
}
