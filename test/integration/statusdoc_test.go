package integration

import (
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hapsuper/hapsuper/test/harness"
)

// statusDoc is `hapsuper status --json`, as the CLI contract defines it.
// Times stay text: the tests only check that they are set and parse.
type statusDoc struct {
	Phase     string `json:"phase"`
	MasterPid int    `json:"masterPid"`
	Drain     *struct {
		StopRequested string `json:"stopRequested"`
		Bound         string `json:"bound"`
		Deadline      string `json:"deadline"`
		SoftStop      string `json:"softStop"`
		Reason        string `json:"reason"`
		Detail        string `json:"detail"`
		Conditions    []struct {
			Name   string `json:"name"`
			Met    bool   `json:"met"`
			Since  string `json:"since"`
			Detail string `json:"detail"`
		} `json:"conditions"`
		ReloadsAfterSoftStop []struct {
			Worker  int
			Via, By string
			Action  string
		} `json:"reloadsAfterSoftStop"`
	} `json:"drain"`
	Workers []statusWorker `json:"workers"`
	Reloads struct {
		OK, Refused, Failed int
		Last                *struct {
			Result, Origin, Detail string
			Worker                 int
		}
	} `json:"reloads"`
}

// statusWorker is one HAProxy worker in the status document.
type statusWorker struct {
	Pid      int   `json:"pid"`
	Old      bool  `json:"old"`
	Sessions int64 `json:"sessions"`
	Requests int64 `json:"requests"`
	// Connections: what quiet counts once routing is withdrawn.
	Connections int64 `json:"connections"`
}

// runStatus runs `hapsuper status --socket <status socket>` with extra
// arguments, bounded to 5 s, and returns stdout, stderr and the exit code.
func (s *supervisor) runStatus(extra ...string) (string, string, int) {
	return runAs(s.t, nil, "", append([]string{hapsuperBin(s.t), "status", "--socket", s.status}, extra...)...)
}

// runAs runs argv as cred (nil: as the test, root), with stdin, bounded to
// 5 s, and returns stdout, stderr (at most 1 MiB of each) and the exit
// code. A command that cannot start fails the test (Errorf: runStatus runs
// in clients' goroutines too).
func runAs(t *testing.T, cred *syscall.Credential, stdin string, argv ...string) (string, string, int) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb limitedBuffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); cmd.ProcessState == nil {
		t.Errorf("start %s as %+v: %v", strings.Join(argv, " "), cred, err)
		return "", "", -1
	}
	return out.String(), errb.String(), harness.ExitCode(cmd.ProcessState)
}

// statusJSON runs `hapsuper status --json` and decodes it; the test fails
// when the command fails or prints something else.
func (s *supervisor) statusJSON() statusDoc {
	s.t.Helper()
	out, errs, code := s.runStatus("--json")
	var d statusDoc
	if code != 0 {
		s.t.Fatalf("hapsuper status --json exited %d: %s%s", code, out, errs)
	}
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		s.t.Fatalf("hapsuper status --json printed no status document (%v): %q", err, out)
	}
	return d
}

// currentWorkers returns the pids of the workers that are not old.
func (d statusDoc) currentWorkers() []int {
	var pids []int
	for _, w := range d.Workers {
		if !w.Old {
			pids = append(pids, w.Pid)
		}
	}
	return pids
}

// waitWorkers waits, at most 2 s (the status learns the workers from its
// first polls of the master CLI, which may come just after "haproxy
// ready"), for the status to list a current worker.
func (s *supervisor) waitWorkers() statusDoc {
	s.t.Helper()
	d, ok := s.waitStatus(2*time.Second, func(d statusDoc) bool { return len(d.currentWorkers()) > 0 })
	if !ok {
		s.t.Fatalf("status lists no current worker 2 s after HAProxy was ready: %+v", d)
	}
	return d
}

// waitStatus polls the status until ok accepts it, at most timeout, and
// returns the last document read and whether ok accepted it.
func (s *supervisor) waitStatus(timeout time.Duration, ok func(statusDoc) bool) (statusDoc, bool) {
	s.t.Helper()
	end := time.Now().Add(timeout)
	for {
		d := s.statusJSON()
		if ok(d) {
			return d, true
		}
		if time.Now().After(end) {
			return d, false
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// limitedBuffer keeps at most 1 MiB of a command's output.
type limitedBuffer struct{ b []byte }

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := 1<<20 - len(l.b); room > 0 {
		if len(p) < room {
			room = len(p)
		}
		l.b = append(l.b, p[:room]...)
	}
	return len(p), nil
}

func (l *limitedBuffer) String() string { return string(l.b) }
