package integration

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hapsuper/hapsuper/test/harness"
)

// statusFloodConns is how many connections flood the status socket at once.
const statusFloodConns = 200

// TestFault_StatusSocketFlood: 200 connections at once keep the status
// socket busy for the first 1.5 s of the drain (a third sending nothing, a
// third binary garbage, a third a 256 KiB line) while a client sends for 3 s.
// The drain does not notice: it ends quiet within the usual window after the
// client stops, and hapsuper exits 0. `hapsuper status --json` answers
// during the flood (a silent connection holds one of the 16 request slots
// for 0.5 s only; the client waits 5 s) and right after it.
func TestFault_StatusSocketFlood(t *testing.T) {
	eachHAProxy(t, func(t *testing.T, h haproxyVersion) {
		b := fast
		cfg := newConfig(t)
		s := serve(t, h, cfg, b.flags()...)
		s.waitWorkers()
		flood := startStatusFlood(t, s.status, statusFloodConns)
		queries := startLoop(t, "status --json during the flood", 200*time.Millisecond, 30*time.Second, func(_ context.Context, rec *recorder) {
			rec.add(queryStatus(s))
		})
		var floodEnd time.Time
		var after outcome
		r := s.drain(cfg.webAddr(), syscall.SIGTERM, func(r *drainRun) {
			time.Sleep(time.Until(r.term.Add(1500 * time.Millisecond)))
			floodEnd = flood.stop()
			queries.stop()
			// Right after the flood, the drain still under way: the status
			// must answer within a few seconds.
			for end := time.Now().Add(5 * time.Second); time.Now().Before(end) && !s.Exited(); time.Sleep(100 * time.Millisecond) {
				if after = queryStatus(s); after.kind == harness.KindOK {
					break
				}
			}
			time.Sleep(time.Until(r.term.Add(3 * time.Second)))
		})
		t.Logf("%s; flood %s..%s after SIGTERM", flood, flood.started.Sub(r.term), floodEnd.Sub(r.term))
		t.Logf("%s; right after the flood: %s, took %s", queries.rec.summary(), after, after.end.Sub(after.start))

		if flood.opened.Load() < statusFloodConns {
			t.Errorf("%s: fewer than %d connections, not a flood", flood, statusFloodConns)
		}
		checkQuietEnd(t, r.ended, r.cont.rec.lastStart())
		ok := queries.rec.where(func(q outcome) bool { return q.kind == harness.KindOK })
		if len(ok) == 0 {
			t.Errorf("hapsuper status --json never answered during the flood: %s", queries.rec.summary())
		}
		for _, q := range ok {
			t.Logf("answered during the flood in %s", q.end.Sub(q.start))
		}
		if after.kind != harness.KindOK {
			t.Errorf("hapsuper status --json did not answer right after the flood: %s", after)
		}
		if r.code != 0 {
			t.Errorf("exit code %d, want 0", r.code)
		}
		r.checkInBudget(b, b.exitLimit())
	})
}

// statusFlood keeps n connections to the status socket busy until stopped
// (at the latest when the test ends): each one, in a loop, connects, sends
// its kind of load, and reads until the server closes.
type statusFlood struct {
	started            time.Time
	opened, dialFailed atomic.Int64
	cancel             context.CancelFunc
	wg                 sync.WaitGroup
}

func startStatusFlood(t *testing.T, path string, n int) *statusFlood {
	ctx, cancel := context.WithCancel(context.Background())
	f := &statusFlood{started: time.Now(), cancel: cancel}
	t.Cleanup(func() { f.stop() })
	garbage := make([]byte, 4096)
	_, _ = rand.Read(garbage)
	longLine := []byte(strings.Repeat("x", 256<<10))
	for i := range n {
		f.wg.Go(func() {
			for ctx.Err() == nil {
				c, err := net.DialTimeout("unix", path, time.Second)
				if err != nil {
					f.dialFailed.Add(1)
					select {
					case <-ctx.Done():
					case <-time.After(50 * time.Millisecond):
					}
					continue
				}
				f.opened.Add(1)
				unhook := context.AfterFunc(ctx, func() { c.Close() }) // stop closes it at once
				_ = c.SetDeadline(time.Now().Add(10 * time.Second))
				switch i % 3 {
				case 1:
					_, _ = c.Write(garbage)
				case 2:
					_, _ = c.Write(longLine)
				}
				_, _ = io.Copy(io.Discard, c)
				unhook()
				c.Close()
			}
		})
	}
	return f
}

// stop closes every flood connection and returns when it did.
func (f *statusFlood) stop() time.Time {
	f.cancel()
	f.wg.Wait()
	return time.Now()
}

func (f *statusFlood) String() string {
	return fmt.Sprintf("status flood: %d connections of %d clients, %d dials failed",
		f.opened.Load(), statusFloodConns, f.dialFailed.Load())
}

// queryStatus runs `hapsuper status --json` once (bounded to 5 s): ok when
// it exits 0 with a status document.
func queryStatus(s *supervisor) outcome {
	o := outcome{start: time.Now(), kind: harness.KindOK}
	out, errs, code := s.runStatus("--json")
	o.end = time.Now()
	if code != 0 || !strings.Contains(out, `"phase"`) {
		o.kind, o.err = harness.KindOther, fmt.Sprintf("exit %d: %s", code, strings.TrimSpace(errs))
	}
	return o
}

// TestFault_StatusClientsDoNotHoldTheExit: 50 silent connections on the
// status socket when HAProxy exits do not keep hapsuper running: it exits
// within 100 ms of the master (17 of them held it 2.7 s, past the grace
// period on the hard-stop path).
func TestFault_StatusClientsDoNotHoldTheExit(t *testing.T) {
	eachHAProxy(t, func(t *testing.T, h haproxyVersion) {
		cfg := newConfig(t)
		s := serve(t, h, cfg, fast.flags()...)
		s.waitWorkers()
		for range 50 {
			c, err := net.Dial("unix", s.status)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
		}
		s.signal(syscall.SIGTERM)
		exited := s.waitLog("haproxy exited", 10*time.Second)
		code, exitAt := s.waitExit(5 * time.Second)
		gap := exitAt.Sub(exited.At)
		t.Logf("hapsuper exited %d %s after HAProxy's master, 50 silent status clients connected", code, gap)
		if gap > 100*time.Millisecond {
			t.Errorf("hapsuper exited %s after HAProxy's master, want within 100 ms", gap)
		}
		s.checkClean(code)
	})
}
