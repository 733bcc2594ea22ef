package runtimeapi

// Table tests on replies captured from HAProxy 3.0 (testdata/3.0, see
// testdata/README): the parsers must read 3.0 as they read 2.6. What 3.0
// answers differently: show info and show stat carry more fields and
// columns (parsed by name, so no change); the "Unknown command" help lists
// other commands.

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// fixture30 returns a reply captured from HAProxy 3.0.
func fixture30(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "3.0", name))
	if err != nil {
		t.Fatalf("read fixture: %v", err)
	}
	return string(b)
}

const version30 = "3.0.11-1+deb13u4"

func TestParseShowProcFixtures30(t *testing.T) {
	master := func(reloads, failed int) Process {
		return Process{PID: 1850, Role: "master", Reloads: reloads, FailedReloads: failed, Version: version30}
	}
	worker := func(pid, reloads int, old bool) Process {
		return Process{PID: pid, Role: "worker", Old: old, Reloads: reloads, Version: version30}
	}
	for _, tc := range []struct {
		file    string
		master  Process
		current []Process
		old     []Process
	}{
		{"show-proc.txt", master(0, 0), []Process{worker(1875, 0, false)}, nil},
		{"show-proc-old-workers.txt", master(1, 0), []Process{worker(2154, 0, false)}, []Process{worker(1875, 1, true)}},
		// After a failed reload the worker of the last good config stays
		// current; the master counts the reload and the failure.
		{"show-proc-failed-reload.txt", master(2, 1), []Process{worker(2154, 1, false)}, []Process{worker(1875, 2, true)}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			got, err := parseShowProcReply(fixture30(t, tc.file))
			if err != nil {
				t.Fatal(err)
			}
			noUptime := func(ps []Process) []Process {
				for i := range ps {
					if ps[i].Uptime == "" {
						t.Errorf("pid %d: empty uptime", ps[i].PID)
					}
					ps[i].Uptime = ""
				}
				return ps
			}
			if g := noUptime([]Process{got.Master})[0]; g != tc.master {
				t.Errorf("master = %+v, want %+v", g, tc.master)
			}
			if g := noUptime(got.Current); !equalProcs(g, tc.current) {
				t.Errorf("current = %+v, want %+v", g, tc.current)
			}
			if g := noUptime(got.Old); !equalProcs(g, tc.old) {
				t.Errorf("old = %+v, want %+v", g, tc.old)
			}
		})
	}
}

func TestParseShowInfoFixtures30(t *testing.T) {
	multi, err := splitOutputs(fixture30(t, "sample-multi.txt"), 4)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		output string
		pid    int
		want   Info
	}{
		// 5 HTTP requests, 2 TCP connections, and the master's CLI connection.
		{"current worker", mustOne(t, fixture30(t, "show-info.txt")), 1875, Info{PID: 1875, CumConns: 8, CumReq: 8}},
		{"new worker after reload", multi[0], 2154, Info{PID: 2154, CumConns: 5, CumReq: 5}},
		{"old worker with open connections", multi[2], 1875, Info{PID: 1875, Stopping: true, CurrConns: 2, CumConns: 13, CumReq: 13}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseShowInfo(tc.output, tc.pid)
			if err != nil || got != tc.want {
				t.Fatalf("parseShowInfo = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

func TestParseShowStatFixtures30(t *testing.T) {
	multi, err := splitOutputs(fixture30(t, "sample-multi.txt"), 4)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		output string
		want   []Frontend
	}{
		{"current worker", mustOne(t, fixture30(t, "show-stat.txt")), []Frontend{
			{Name: "web", Mode: "http", Status: "OPEN", Stot: 5, ReqTot: 5, ConnTot: 5, HasConnTot: true},
			{Name: "rawtcp", Mode: "tcp", Status: "OPEN", Stot: 2, ConnTot: 2, HasConnTot: true},
		}},
		{"new worker after reload", multi[1], []Frontend{
			{Name: "web", Mode: "http", Status: "OPEN", Stot: 3, ReqTot: 3, ConnTot: 3, HasConnTot: true},
			{Name: "rawtcp", Mode: "tcp", Status: "OPEN", Stot: 1, ConnTot: 1, HasConnTot: true},
		}},
		{"old worker after reload", multi[3], []Frontend{
			{Name: "web", Mode: "http", Status: "STOP", Scur: 1, Stot: 6, ReqTot: 6, ConnTot: 6, HasConnTot: true},
			{Name: "rawtcp", Mode: "tcp", Status: "STOP", Scur: 1, Stot: 3, ConnTot: 3, HasConnTot: true},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseShowStat(tc.output)
			if err != nil || !slices.Equal(got, tc.want) {
				t.Fatalf("parseShowStat = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

// TestErrorFixtures30: the error answers of 3.0 are recognised as 2.6's are.
func TestErrorFixtures30(t *testing.T) {
	for _, tc := range []struct {
		name    string
		parse   func(reply string) error
		file    string
		wantIs  error
		wantMsg string
	}{
		{"show proc: unknown command", func(r string) error { _, err := parseShowProcReply(r); return err },
			"error-unknown-master.txt", ErrCLI, "Unknown command: 'foo'"},
		{"show info: unknown command", func(r string) error { _, err := parseShowInfo(mustOne(t, r), 2154); return err },
			"error-unknown-worker.txt", ErrCLI, "Unknown command: 'foo'"},
		{"show stat: no such proxy", func(r string) error { _, err := parseShowStat(mustOne(t, r)); return err },
			"error-no-proxy.txt", ErrCLI, "No such proxy."},
		{"no such pid", func(r string) error { _, err := splitOutputs(r, 1); return err },
			"error-no-pid.txt", ErrNoSuchProcess, "'@!99999'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.parse(fixture30(t, tc.file))
			if !errors.Is(err, tc.wantIs) || !strings.Contains(err.Error(), tc.wantMsg) {
				t.Fatalf("error = %v; want %v saying %q", err, tc.wantIs, tc.wantMsg)
			}
		})
	}
}

// TestSplitOutputsVanished30: on 3.0 too, a line stops at a pid the master
// does not know; the outputs before it are kept.
func TestSplitOutputsVanished30(t *testing.T) {
	outputs, err := splitOutputs(fixture30(t, "sample-vanished.txt"), 5)
	if len(outputs) != 2 || !errors.Is(err, ErrNoSuchProcess) {
		t.Fatalf("splitOutputs = %d outputs, %v; want 2 and ErrNoSuchProcess", len(outputs), err)
	}
	if pid, ok := noTargetPID(err); !ok || pid != 99999 {
		t.Errorf("noTargetPID = %d, %v; want 99999", pid, ok)
	}
}

// TestClientAgainst30Replies drives the Client against a fake master that
// answers with the 3.0 captures byte for byte.
func TestClientAgainst30Replies(t *testing.T) {
	sampleLine := "@!2154 show info; @!2154 show stat -1 1 -1; @!1875 show info; @!1875 show stat -1 1 -1"
	f := newFakeMaster(t, func(line string) (string, bool) {
		switch line {
		case "show proc":
			return fixture30(t, "show-proc-old-workers.txt"), false
		case sampleLine:
			return fixture30(t, "sample-multi.txt"), false
		}
		return fixture30(t, "error-unknown-master.txt"), false
	})
	c := New(f.path, time.Second)

	s, err := within(t, 5*time.Second, func() result[Sample] { return wrap(c.Sample(context.Background())) }).get()
	if err != nil {
		t.Fatal(err)
	}
	if s.Master.PID != 1850 || len(s.Workers) != 2 || len(s.Skipped) != 0 {
		t.Fatalf("sample = %+v; want master 1850, 2 workers, none skipped", s)
	}
	cur, old := s.Workers[0], s.Workers[1]
	if cur.Process.PID != 2154 || cur.Info.Stopping || cur.Frontends[0].ReqTot != 3 {
		t.Errorf("current worker = %+v", cur)
	}
	if old.Process.PID != 1875 || !old.Process.Old || !old.Info.Stopping || old.Info.CurrConns != 2 || old.Frontends[0].Scur != 1 {
		t.Errorf("old worker = %+v", old)
	}
}
