package runtimeapi

import (
	"bufio"
	"cmp"
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// scriptedMaster is a master CLI on a unix socket that answers `show proc`
// with one reply and every other line with another, both replaceable between
// calls. It counts the connections it served. One serves a whole fuzz run.
type scriptedMaster struct {
	path    string
	replies atomic.Pointer[[2]string] // show proc, any other line
	conns   atomic.Int64
}

func newScriptedMaster(tb testing.TB) *scriptedMaster {
	tb.Helper()
	m := &scriptedMaster{path: filepath.Join(tb.TempDir(), "master.sock")}
	m.replies.Store(&[2]string{})
	ln, err := net.Listen("unix", m.path)
	if err != nil {
		tb.Fatalf("listen on %s: %v", m.path, err)
	}
	var wg sync.WaitGroup
	tb.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			m.conns.Add(1)
			wg.Go(func() { m.serve(conn) })
		}
	})
	return m
}

func (m *scriptedMaster) serve(conn net.Conn) {
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second)) // bounds a stuck client
	in, err := io.ReadAll(bufio.NewReader(conn))           // the client half-closes after its line
	if err != nil {
		return
	}
	replies := m.replies.Load()
	reply := replies[1]
	if line, _, _ := strings.Cut(string(in), "\n"); line == "show proc" {
		reply = replies[0]
	}
	_, _ = io.WriteString(conn, reply)
}

// FuzzSample drives Client.Sample over a real socket with an arbitrary show
// proc reply and an arbitrary reply to every worker line. Sample must end
// within its timeouts after at most one connection per worker (plus show
// proc), and either fail with a zero Sample or account for every worker of
// show proc exactly once: sampled with its own counters, or skipped when old.
//
// Seeds: every show proc capture paired with every sample capture of the
// same HAProxy version.
func FuzzSample(f *testing.F) {
	captures := capturedReplies(f)
	for _, proc := range captures {
		for _, sample := range captures {
			if strings.Contains(proc.name, "show-proc") && strings.Contains(sample.name, "sample-") &&
				filepath.Dir(proc.name) == filepath.Dir(sample.name) {
				f.Add(proc.reply, sample.reply)
			}
		}
	}
	// Old worker 4006 gone, and exiting, after current worker 4288 answered:
	// both end in a Sample that skips it.
	showProc := fixtureTB(f, "2.6", "show-proc-old-workers.txt")
	if outs, err := splitOutputs(fixtureTB(f, "2.6", "sample-multi.txt"), 4); err == nil {
		current := outs[0] + "\n" + outs[1] + "\n"
		f.Add(showProc, current+"Can't find the target PID matching the prefix '@!4006'\n")
		f.Add(showProc, current+"Can't connect to the target CLI!\n")
		f.Add(showProc, current)
		// Found by this target: data after every output asked for made
		// sampleWorkers index past its batch and panic.
		f.Add(showProc, outs[0]+"\n"+outs[1]+"\n"+outs[2]+"\n"+outs[3]+"\nUnknown command\n\n")
	}
	m := newScriptedMaster(f)
	client := New(m.path, 2*time.Second)
	f.Fuzz(func(t *testing.T, showProc, workers string) {
		m.replies.Store(&[2]string{showProc, workers})
		before := m.conns.Load()
		type result struct {
			s   Sample
			err error
		}
		r := within(t, 10*time.Second, func() result {
			s, err := client.Sample(context.Background())
			return result{s, err}
		})
		conns := m.conns.Load() - before

		procs, procErr := parseShowProcReply(showProc)
		listed := append(slices.Clone(procs.Current), procs.Old...)
		if limit := int64(1 + len(listed)); conns > limit {
			t.Fatalf("Sample used %d connections for %d workers (limit %d); err %v", conns, len(listed), limit, r.err)
		}
		if r.err != nil {
			if n := len(r.err.Error()); n > maxErrorLen {
				t.Fatalf("error of %d bytes (limit %d): %.300q", n, maxErrorLen, r.err)
			}
			if r.s.Master.PID != 0 || r.s.Workers != nil || r.s.Skipped != nil || r.s.Unreachable != nil {
				t.Fatalf("error %v with a non-zero Sample %+v", r.err, r.s)
			}
			return
		}
		if procErr != nil {
			t.Fatalf("Sample succeeded on a show proc reply the parser refuses (%v): %q", procErr, showProc)
		}
		if r.s.Master != procs.Master {
			t.Fatalf("Sample master %+v, show proc says %+v", r.s.Master, procs.Master)
		}
		var accounted []Process
		for _, w := range r.s.Workers {
			if w.Info.PID != w.Process.PID {
				t.Fatalf("worker %d sampled with the counters of pid %d", w.Process.PID, w.Info.PID)
			}
			for _, fe := range w.Frontends {
				if fe.Name == "" {
					t.Fatalf("worker %d has a frontend without a name: %+v", w.Process.PID, w.Frontends)
				}
			}
			accounted = append(accounted, w.Process)
		}
		for _, p := range r.s.Skipped {
			if !p.Old {
				t.Fatalf("current worker %d skipped", p.PID)
			}
			accounted = append(accounted, p)
		}
		for _, p := range r.s.Unreachable {
			if p.Old {
				t.Fatalf("old worker %d unreachable: it must be skipped", p.PID)
			}
			accounted = append(accounted, p)
		}
		byPID := func(a, b Process) int {
			return cmp.Or(cmp.Compare(a.PID, b.PID), cmp.Compare(a.Reloads, b.Reloads), boolCmp(a.Old, b.Old))
		}
		slices.SortFunc(accounted, byPID)
		slices.SortFunc(listed, byPID)
		if !slices.Equal(accounted, listed) {
			t.Fatalf("Sample accounted for %+v, show proc listed %+v", accounted, listed)
		}
	})
}

func boolCmp(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// fixtureTB returns the capture testdata/version/name.
func fixtureTB(tb testing.TB, version, name string) string {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", version, name))
	if err != nil {
		tb.Fatalf("read fixture: %v", err)
	}
	return string(b)
}
