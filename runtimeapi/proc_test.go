package runtimeapi

import (
	"errors"
	"strings"
	"testing"
)

func TestParseShowProcFixtures(t *testing.T) {
	master := func(reloads, failed int) Process {
		return Process{PID: 3983, Role: "master", Reloads: reloads, FailedReloads: failed, Version: "2.6.12-1+deb12u4"}
	}
	worker := func(pid, reloads int, old bool) Process {
		return Process{PID: pid, Role: "worker", Old: old, Reloads: reloads, Version: "2.6.12-1+deb12u4"}
	}
	for _, tc := range []struct {
		file    string
		master  Process
		current []Process
		old     []Process
	}{
		{"show-proc.txt", master(0, 0), []Process{worker(4006, 0, false)}, nil},
		{"show-proc-old-workers.txt", master(1, 0), []Process{worker(4288, 0, false)}, []Process{worker(4006, 1, true)}},
		{"show-proc-failed-reload.txt", master(2, 1), []Process{worker(4288, 1, false)}, []Process{worker(4006, 2, true)}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			got, err := parseShowProcReply(fixture(t, tc.file))
			if err != nil {
				t.Fatal(err)
			}
			clearUptime := func(ps []Process) []Process {
				for i := range ps {
					if ps[i].Uptime == "" {
						t.Errorf("pid %d: empty uptime", ps[i].PID)
					}
					ps[i].Uptime = ""
				}
				return ps
			}
			got.Master = clearUptime([]Process{got.Master})[0]
			if got.Master != tc.master {
				t.Errorf("master = %+v, want %+v", got.Master, tc.master)
			}
			if g, w := clearUptime(got.Current), tc.current; !equalProcs(g, w) {
				t.Errorf("current = %+v, want %+v", g, w)
			}
			if g, w := clearUptime(got.Old), tc.old; !equalProcs(g, w) {
				t.Errorf("old = %+v, want %+v", g, w)
			}
		})
	}
}

func equalProcs(a, b []Process) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestParseShowProcErrors(t *testing.T) {
	good := fixture(t, "show-proc-old-workers.txt")
	for _, tc := range []struct {
		name    string
		reply   string
		wantIs  error
		wantMsg string
	}{
		{"truncated", good[:len(good)/2], ErrPartialReply, ""},
		{"no final empty line", strings.TrimSuffix(good, "\n"), ErrPartialReply, ""},
		{"unknown command", fixture(t, "error-unknown-master.txt"), ErrCLI, "Unknown command"},
		{"garbage", "hello world\n\n", ErrCLI, "hello world"},
		{"unknown section", strings.Replace(good, "# old workers", "# leaving workers", 1), nil, "unknown section"},
		{"bad pid", strings.Replace(good, "4288 ", "42x8 ", 1), nil, "bad pid"},
		{"worker line in master place", strings.Replace(good, "master    ", "worker    ", 1), nil, "unexpected worker"},
		{"no master", "#<PID>          <type>          <reloads>       <uptime>        <version>\n# workers\n\n", nil, "no master"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseShowProcReply(tc.reply)
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
