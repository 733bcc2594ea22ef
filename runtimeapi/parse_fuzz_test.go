package runtimeapi

import (
	"errors"
	"os"
	"path/filepath"
	"runtime/metrics"
	"strings"
	"testing"
)

// The fuzz targets below feed the parsers arbitrary master-CLI replies. Every
// captured reply in testdata/2.6 and testdata/3.0 is a seed (each target gets
// all of them: a show stat capture is a fine start for a show proc mutation),
// plus hand-made replies whose numbers are huge, so that a parser that
// allocated by a count read from the input would show at once. With plain
// `go test` the seeds run as unit tests. Run one with
//
//	go test -run '^$' -fuzz '^FuzzParseShowProc$' -fuzztime 60s ./runtimeapi/
//
// or all of them with `make fuzz` (hack/fuzz.sh).

// capture is one reply of testdata, named by its path below testdata
// ("2.6/show-proc.txt").
type capture struct{ name, reply string }

// capturedReplies returns every capture of testdata/2.6 and testdata/3.0, in
// file name order so that seed numbers stay the same from run to run.
func capturedReplies(tb testing.TB) []capture {
	tb.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "*", "*.txt"))
	if err != nil || len(files) == 0 {
		tb.Fatalf("no captures in testdata/*/*.txt (err %v)", err)
	}
	captures := make([]capture, 0, len(files))
	for _, file := range files { // Glob sorts
		b, err := os.ReadFile(file)
		if err != nil {
			tb.Fatalf("read capture: %v", err)
		}
		rel, _ := filepath.Rel("testdata", file)
		captures = append(captures, capture{rel, string(b)})
	}
	return captures
}

// hugeNumberReplies are replies whose counts and pids are the largest an
// int64 (or uint64) holds, or one more, each well-formed otherwise.
var hugeNumberReplies = []string{
	"#<PID>          <type>          <reloads>       <uptime>        <version>\n" +
		"3983            master          9223372036854775807 [failed: 9223372036854775807]   0d00h00m32s     2.6.12\n" +
		"# workers\n" +
		"9223372036854775807 worker      9223372036854775807   0d00h00m17s     2.6.12\n\n",
	"#<PID>          <type>          <reloads>       <uptime>        <version>\n" +
		"3983            master          99999999999999999999   0d00h00m32s     2.6.12\n\n",
	"Name: HAProxy\nPid: 4006\nStopping: 9223372036854775807\nCurrConns: 9223372036854775807\n" +
		"CumConns: 9223372036854775807\nCumReq: -9223372036854775808\n\n",
	"Name: HAProxy\nPid: 4006\nStopping: 0\nCurrConns: 0\nCumConns: 99999999999999999999\nCumReq: 0\n\n",
	"# pxname,svname,status,scur,stot,req_tot,mode\n" +
		"web,FRONTEND,OPEN,9223372036854775807,18446744073709551615,18446744073709551615,http\n\n",
	"# pxname,svname,status,scur,stot,req_tot,mode\n" +
		"web,FRONTEND,OPEN,1,18446744073709551616,0,http\n\n",
}

// addReplySeeds adds every captured reply and hugeNumberReplies to f.
func addReplySeeds(f *testing.F) {
	for _, c := range capturedReplies(f) {
		f.Add(c.reply)
	}
	for _, reply := range hugeNumberReplies {
		f.Add(reply)
	}
}

// heapAllocs reads the bytes allocated on the heap so far. It does not stop
// the world; small allocations are counted a span at a time, so a delta is
// exact to within a few hundred KiB: plenty to see an allocation sized by a
// number read from the input.
func heapAllocs() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// checkAllocBound runs parse and fails if it allocated more than a fixed
// 4 MiB plus 256 bytes per input byte.
func checkAllocBound(t *testing.T, input string, parse func()) {
	t.Helper()
	before := heapAllocs()
	parse()
	if got, limit := heapAllocs()-before, uint64(4<<20+256*len(input)); got > limit {
		t.Fatalf("parsing %d bytes allocated %d bytes (limit %d): %.200q", len(input), got, limit, input)
	}
}

// FuzzParseShowProc: a show proc reply is an error or a master with a pid,
// current workers and old workers, each a worker with a pid.
func FuzzParseShowProc(f *testing.F) {
	addReplySeeds(f)
	f.Fuzz(func(t *testing.T, reply string) {
		var procs Processes
		var err error
		checkAllocBound(t, reply, func() { procs, err = parseShowProcReply(reply) })
		checkErrorBound(t, err)
		if err != nil {
			if err.Error() == "" {
				t.Fatalf("empty error for %q", reply)
			}
			return
		}
		if m := procs.Master; m.PID <= 0 || m.Role != "master" || m.Old || m.Uptime == "" || m.Version == "" {
			t.Fatalf("accepted %q with master %+v", reply, m)
		}
		for _, group := range []struct {
			procs []Process
			old   bool
		}{{procs.Current, false}, {procs.Old, true}} {
			for _, p := range group.procs {
				if p.PID <= 0 || p.Role != "worker" || p.Old != group.old || p.Uptime == "" || p.Version == "" {
					t.Fatalf("accepted %q with worker %+v (old list: %v)", reply, p, group.old)
				}
			}
		}
		if n := len(procs.Current) + len(procs.Old) + 1; n > strings.Count(reply, "\n") {
			t.Fatalf("accepted %q with %d processes in %d lines", reply, n, strings.Count(reply, "\n"))
		}
	})
}

// FuzzParseShowInfo: a show info reply is an error or the counters of the
// worker asked (any worker when asked is 0).
func FuzzParseShowInfo(f *testing.F) {
	for _, c := range capturedReplies(f) {
		f.Add(c.reply, 0)
		f.Add(c.reply, 4006)
	}
	for _, reply := range hugeNumberReplies {
		f.Add(reply, 4006)
	}
	f.Fuzz(func(t *testing.T, reply string, asked int) {
		var info Info
		var err error
		checkAllocBound(t, reply, func() {
			var outputs []string
			if outputs, err = splitOutputs(reply, 1); err == nil {
				info, err = parseShowInfo(outputs[0], asked)
			}
		})
		checkErrorBound(t, err)
		if err != nil {
			if info != (Info{}) {
				t.Fatalf("error %v with a non-zero result %+v", err, info)
			}
			return
		}
		if asked != 0 && info.PID != asked {
			t.Fatalf("asked pid %d, accepted %q as pid %d", asked, reply, info.PID)
		}
		if !strings.Contains(reply, "Name: ") || !strings.Contains(reply, "Pid: ") {
			t.Fatalf("accepted %q without Name or Pid", reply)
		}
	})
}

// FuzzParseShowStat: a show stat reply is an error or a list, empty or not,
// of frontends that each have a name, at most one per row.
func FuzzParseShowStat(f *testing.F) {
	addReplySeeds(f)
	f.Fuzz(func(t *testing.T, reply string) {
		var fes []Frontend
		var err error
		checkAllocBound(t, reply, func() {
			var outputs []string
			if outputs, err = splitOutputs(reply, 1); err == nil {
				fes, err = parseShowStat(outputs[0])
			}
		})
		checkErrorBound(t, err)
		if err != nil {
			return
		}
		if fes == nil {
			t.Fatalf("accepted %q as nil frontends, want an empty list", reply)
		}
		if rows := strings.Count(reply, "\n") - 2; len(fes) > rows { // less the header and the empty line
			t.Fatalf("accepted %q with %d frontends in %d rows", reply, len(fes), rows)
		}
		for _, fe := range fes {
			if fe.Name == "" || strings.ContainsAny(fe.Name, ",\n") {
				t.Fatalf("accepted %q with frontend %+v", reply, fe)
			}
		}
	})
}

// FuzzSplitOutputs: a reply to n commands splits into n outputs that join
// back to the reply, or an error with the outputs before it, which join back
// to a prefix of the reply (all n of them when data follows the last). Each output is empty or ends with one newline, and has no
// empty line inside.
func FuzzSplitOutputs(f *testing.F) {
	for _, c := range capturedReplies(f) {
		n := uint8(1)
		if strings.Contains(c.name, "sample-") {
			n = 4
		}
		f.Add(c.reply, n)
	}
	f.Add("\n\n\n", uint8(3))
	f.Add("Can't find the target PID matching the prefix '@!99999'\n", uint8(2))
	f.Fuzz(func(t *testing.T, reply string, n uint8) {
		want := 1 + int(n)%40 // the commands of two lines of 16 workers, and a few more
		var outputs []string
		var err error
		checkAllocBound(t, reply, func() { outputs, err = splitOutputs(reply, want) })
		checkErrorBound(t, err)
		var joined strings.Builder
		for i, out := range outputs {
			if out != "" && (!strings.HasSuffix(out, "\n") || strings.Contains(out, "\n\n")) {
				t.Fatalf("output %d of %q is %q", i, reply, out)
			}
			joined.WriteString(out + "\n")
		}
		if err == nil {
			if len(outputs) != want || joined.String() != reply {
				t.Fatalf("split %q into %d outputs %q, want %d joining back", reply, len(outputs), outputs, want)
			}
			return
		}
		trailing := strings.HasPrefix(err.Error(), "unexpected data after ")
		if len(outputs) > want || len(outputs) == want && !trailing || !strings.HasPrefix(reply, joined.String()) {
			t.Fatalf("error %v after %d outputs %q of %q", err, len(outputs), outputs, reply)
		}
		var closed *closedBetweenError
		known := errors.Is(err, ErrNoSuchProcess) || errors.Is(err, ErrWorkerUnreachable) || errors.Is(err, ErrPartialReply) || trailing
		if !known {
			t.Fatalf("error %v for %q wraps no known error", err, reply)
		}
		if errors.As(err, &closed) && joined.String() != reply {
			t.Fatalf("closed-between error %v, but %q is not the whole reply %q", err, joined.String(), reply)
		}
		if errors.Is(err, ErrNoSuchProcess) {
			noTargetPID(err) // must not panic, whatever the pid text
		}
	})
}

// checkErrorBound fails when err quotes more of a reply than maxErrorLen
// allows: errors reach the drain's detail and the status reply.
func checkErrorBound(t *testing.T, err error) {
	t.Helper()
	if err != nil && len(err.Error()) > maxErrorLen {
		t.Fatalf("error of %d bytes (limit %d): %.300q", len(err.Error()), maxErrorLen, err)
	}
}
