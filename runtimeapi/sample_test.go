package runtimeapi

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// workerFake answers the master CLI from the 2.6 fixtures: `show proc` with
// showProc, and each `@!<pid> show info|stat` of a line with the captured
// outputs of 4288 (current) or 4006 (old; other pids reuse its outputs with
// their own Pid). trouble makes a pid misbehave the way 2.6 was seen to.
type workerFake struct {
	showProc string
	outputs  []string // info 4288, stat 4288, info 4006, stat 4006
	trouble  map[int]string
}

const (
	gone        = "gone"         // master: "Can't find the target PID", line ends
	unreachable = "unreachable"  // master: "Can't connect to the target CLI!", line ends
	exiting     = "exiting"      // master closes where the worker's output would begin
	exitingStat = "exiting-stat" // the same, after its show info was answered
	cutInside   = "cut-inside"   // the reply stops inside the worker's output
	statError   = "stat-error"   // the worker answers show stat with an error text
)

func newWorkerFake(t *testing.T, showProc string, trouble map[int]string) *workerFake {
	out, err := splitOutputs(fixture(t, "sample-multi.txt"), 4)
	if err != nil {
		t.Fatal(err)
	}
	return &workerFake{showProc: showProc, outputs: out, trouble: trouble}
}

func (w *workerFake) answer(line string) (string, bool) {
	if line == "show proc" {
		return w.showProc, false
	}
	var b strings.Builder
	for cmd := range strings.SplitSeq(line, "; ") {
		var pid int
		var what string
		if _, err := fmt.Sscanf(cmd, "@!%d show %s", &pid, &what); err != nil {
			return b.String() + "Unknown command\n\n", false
		}
		out := w.output(pid, what == "stat")
		switch w.trouble[pid] {
		case gone:
			return b.String() + fmt.Sprintf("Can't find the target PID matching the prefix '@!%d'\n", pid), false
		case unreachable:
			return b.String() + "Can't connect to the target CLI!\n", false
		case exiting:
			return b.String(), false
		case exitingStat:
			if what == "stat" {
				return b.String(), false
			}
		case cutInside:
			return b.String() + out[:len(out)/2], false
		case statError:
			if what == "stat" {
				out = "No such proxy.\n"
			}
		}
		b.WriteString(out + "\n")
	}
	return b.String(), false
}

func (w *workerFake) output(pid int, stat bool) string {
	i := 2
	if pid == 4288 {
		i = 0
	}
	if stat {
		return w.outputs[i+1]
	}
	return strings.Replace(w.outputs[i], "Pid: 4006\n", fmt.Sprintf("Pid: %d\n", pid), 1)
}

// withOldWorker adds old worker pid before the others in a show proc reply.
func withOldWorker(showProc string, pid int) string {
	line := fmt.Sprintf("%-15d worker          2               0d00h00m40s     2.6.12-1+deb12u4\n", pid)
	return strings.Replace(showProc, "# old workers\n", "# old workers\n"+line, 1)
}

func TestSampleCurrentAndOldWorkers(t *testing.T) {
	fake := newWorkerFake(t, fixture(t, "show-proc-old-workers.txt"), nil)
	wantLine := "@!4288 show info; @!4288 show stat -1 1 -1; @!4006 show info; @!4006 show stat -1 1 -1"
	if got, _ := fake.answer(wantLine); got != fixture(t, "sample-multi.txt") {
		t.Fatalf("the fake does not reproduce the captured reply")
	}
	f := newFakeMaster(t, func(line string) (string, bool) {
		if line == wantLine {
			return fixture(t, "sample-multi.txt"), false // the real reply, byte for byte
		}
		return fake.answer(line)
	})
	s, err := within(t, 5*time.Second, func() result[Sample] {
		return wrap(New(f.path, time.Second).Sample(context.Background()))
	}).get()
	if err != nil {
		t.Fatal(err)
	}
	if lines := f.received(); len(lines) != 2 || lines[1] != wantLine {
		t.Fatalf("lines sent: %q; want show proc then %q", lines, wantLine)
	}
	if s.Master.PID != 3983 || len(s.Workers) != 2 || len(s.Skipped) != 0 {
		t.Fatalf("sample = %+v; want master 3983, 2 workers, none skipped", s)
	}
	cur, old := s.Workers[0], s.Workers[1]
	if cur.Process.PID != 4288 || cur.Process.Old || cur.Info.PID != 4288 || cur.Info.Stopping || cur.Frontends[0].ReqTot != 3 {
		t.Errorf("current worker = %+v", cur)
	}
	if old.Process.PID != 4006 || !old.Process.Old || !old.Info.Stopping || old.Info.CurrConns != 2 || old.Frontends[1] != (Frontend{Name: "rawtcp", Mode: "tcp", Status: "STOP", Scur: 1, Stot: 3, ConnTot: 3, HasConnTot: true}) {
		t.Errorf("old worker = %+v", old)
	}
}

func TestSampleWorkerTrouble(t *testing.T) {
	const first, again = "@!4288 show info; @!4288 show stat -1 1 -1; @!4005 show info; @!4005 show stat -1 1 -1; @!4006 show info; @!4006 show stat -1 1 -1",
		"@!4006 show info; @!4006 show stat -1 1 -1"
	for _, tc := range []struct {
		name    string
		trouble map[int]string
		// success: workers sampled, skipped, lines sent after show proc
		workers, skipped, unreachable []int
		lines                         []string
		// failure
		wantIs  error
		wantMsg string
	}{
		{name: "old worker gone is skipped, the rest asked again", trouble: map[int]string{4005: gone},
			workers: []int{4288, 4006}, skipped: []int{4005}, lines: []string{first, again}},
		{name: "old worker unreachable is skipped", trouble: map[int]string{4005: unreachable},
			workers: []int{4288, 4006}, skipped: []int{4005}, lines: []string{first, again}},
		{name: "old worker exiting is skipped", trouble: map[int]string{4005: exiting},
			workers: []int{4288, 4006}, skipped: []int{4005}, lines: []string{first, again}},
		{name: "old worker exiting between its two commands is skipped", trouble: map[int]string{4005: exitingStat},
			workers: []int{4288, 4006}, skipped: []int{4005}, lines: []string{first, again}},
		{name: "last old worker gone", trouble: map[int]string{4006: gone},
			workers: []int{4288, 4005}, skipped: []int{4006}, lines: []string{first}},
		{name: "every old worker gone", trouble: map[int]string{4005: gone, 4006: exiting},
			workers: []int{4288}, skipped: []int{4005, 4006}, lines: []string{first, again}},
		{name: "current worker gone is unreachable, the rest asked again", trouble: map[int]string{4288: gone},
			workers: []int{4005, 4006}, unreachable: []int{4288}, lines: []string{first, "@!4005 show info; @!4005 show stat -1 1 -1; @!4006 show info; @!4006 show stat -1 1 -1"}},
		{name: "current worker unreachable (3.2: still loading)", trouble: map[int]string{4288: unreachable},
			workers: []int{4005, 4006}, unreachable: []int{4288}, lines: []string{first, "@!4005 show info; @!4005 show stat -1 1 -1; @!4006 show info; @!4006 show stat -1 1 -1"}},
		{name: "current worker closing is an error", trouble: map[int]string{4288: exitingStat},
			wantIs: ErrPartialReply, wantMsg: "show stat on worker 4288: partial reply"},
		{name: "reply cut inside an old worker's output is an error", trouble: map[int]string{4005: cutInside},
			wantIs: ErrPartialReply, wantMsg: "show info on worker 4005: partial reply"},
		{name: "error answer from an old worker is an error", trouble: map[int]string{4006: statError},
			wantIs: ErrCLI, wantMsg: `show stat on worker 4006: error answer from HAProxy: unexpected output "No such proxy."`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := newWorkerFake(t, withOldWorker(fixture(t, "show-proc-old-workers.txt"), 4005), tc.trouble)
			f := newFakeMaster(t, fake.answer)
			s, err := within(t, 5*time.Second, func() result[Sample] {
				return wrap(New(f.path, time.Second).Sample(context.Background()))
			}).get()
			if tc.wantIs != nil {
				if !errors.Is(err, tc.wantIs) || !strings.Contains(err.Error(), tc.wantMsg) {
					t.Fatalf("Sample error = %v; want %v saying %q", err, tc.wantIs, tc.wantMsg)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := samplePIDs(s.Workers); fmt.Sprint(got) != fmt.Sprint(tc.workers) {
				t.Errorf("workers %v, want %v", got, tc.workers)
			}
			if got := procPIDs(s.Skipped); fmt.Sprint(got) != fmt.Sprint(tc.skipped) {
				t.Errorf("skipped %v, want %v", got, tc.skipped)
			}
			if got := procPIDs(s.Unreachable); fmt.Sprint(got) != fmt.Sprint(tc.unreachable) {
				t.Errorf("unreachable %v, want %v", got, tc.unreachable)
			}
			if got := f.received()[1:]; fmt.Sprint(got) != fmt.Sprint(tc.lines) {
				t.Errorf("lines after show proc:\n%q\nwant\n%q", got, tc.lines)
			}
		})
	}
}

// sample-unreachable.txt was captured while old worker 17966 was exiting.
func TestSampleCapturedUnreachableOldWorker(t *testing.T) {
	showProc := strings.NewReplacer("4288 ", "17972", "4006 ", "17966").Replace(fixture(t, "show-proc-old-workers.txt"))
	f := newFakeMaster(t, func(line string) (string, bool) {
		if line == "show proc" {
			return showProc, false
		}
		return fixture(t, "sample-unreachable.txt"), false
	})
	s, err := within(t, 5*time.Second, func() result[Sample] {
		return wrap(New(f.path, time.Second).Sample(context.Background()))
	}).get()
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(samplePIDs(s.Workers), procPIDs(s.Skipped)) != "[17972] [17966]" || len(f.received()) != 2 {
		t.Fatalf("workers %v, skipped %v after lines %q; want [17972], [17966] in one line",
			samplePIDs(s.Workers), procPIDs(s.Skipped), f.received())
	}
}

func TestSampleManyWorkersUseSeveralLines(t *testing.T) {
	showProc := fixture(t, "show-proc-old-workers.txt")
	for pid := 5000; pid < 5019; pid++ {
		showProc = withOldWorker(showProc, pid)
	}
	f := newFakeMaster(t, newWorkerFake(t, showProc, nil).answer)
	s, err := within(t, 5*time.Second, func() result[Sample] {
		return wrap(New(f.path, time.Second).Sample(context.Background()))
	}).get()
	if err != nil {
		t.Fatal(err)
	}
	lines := f.received()
	if len(s.Workers) != 21 || len(lines) != 3 ||
		strings.Count(lines[1], "show info") != maxWorkersPerLine || strings.Count(lines[2], "show info") != 5 {
		t.Fatalf("%d workers sampled with lines %q; want 21 workers on lines of 16 and 5", len(s.Workers), lines)
	}
	for _, w := range s.Workers {
		if w.Info.PID != w.Process.PID {
			t.Errorf("worker %d got the info of %d", w.Process.PID, w.Info.PID)
		}
	}
}

func TestSampleShowProcError(t *testing.T) {
	f := newFakeMaster(t, func(string) (string, bool) { return fixture(t, "error-unknown-master.txt"), false })
	_, err := within(t, 5*time.Second, func() result[Sample] {
		return wrap(New(f.path, time.Second).Sample(context.Background()))
	}).get()
	if !errors.Is(err, ErrCLI) || !strings.HasPrefix(err.Error(), "show proc on master: ") {
		t.Fatalf("Sample error = %v; want show proc on master: ... ErrCLI", err)
	}
}

func samplePIDs(ws []WorkerSample) []int {
	var pids []int
	for _, w := range ws {
		pids = append(pids, w.Process.PID)
	}
	return pids
}

func procPIDs(ps []Process) []int {
	var pids []int
	for _, p := range ps {
		pids = append(pids, p.PID)
	}
	return pids
}
