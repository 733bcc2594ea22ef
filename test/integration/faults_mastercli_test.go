package integration

import (
	"crypto/rand"
	"errors"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestFault_MasterCLIGoneDuringDrain: while a client sends, the master CLI
// socket file is removed (Removed), or replaced by a socket of the test's
// that answers garbage (Garbage) or accepts and never answers (Silent).
// Every poll fails from then on, so quiet cannot be proved: the drain runs
// to the bound and ends with reason unavailable, not sooner (a bad reply
// must not end it early). The soft stop still goes out (a signal needs no
// socket), HAProxy finishes, and hapsuper exits 0 well inside the budget.
func TestFault_MasterCLIGoneDuringDrain(t *testing.T) {
	eachHAProxy(t, func(t *testing.T, h haproxyVersion) {
		for _, tc := range []struct {
			name    string
			replace func(t *testing.T, path string) *fakeCLI // nil: leave the path empty
		}{
			{"Removed", nil},
			{"Garbage", func(t *testing.T, path string) *fakeCLI { return listenFakeCLI(t, path, answerGarbage) }},
			{"Silent", func(t *testing.T, path string) *fakeCLI { return listenFakeCLI(t, path, nil) }},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				b := fast
				cfg := newConfig(t)
				s := serve(t, h, cfg, b.flags()...)
				s.waitWorkers()
				var fake *fakeCLI
				r := s.drain(cfg.webAddr(), syscall.SIGTERM, func(r *drainRun) {
					time.Sleep(300 * time.Millisecond)
					t.Logf("socket replaced %s after SIGTERM", time.Since(r.term))
					if err := os.Remove(s.master); err != nil {
						t.Fatalf("remove the master CLI socket: %v", err)
					}
					if tc.replace != nil {
						fake = tc.replace(t, s.master)
					}
					time.Sleep(time.Second)
				})
				t.Logf("client stopped %s after SIGTERM; %d hard stop", r.cont.rec.lastStart().Sub(r.term), len(s.All("hard stop")))

				r.checkReason("unavailable") // no poll answered since the socket went
				r.checkAtBound()
				if fake != nil {
					t.Logf("the fake master CLI took %d connections", fake.conns.Load())
					if fake.conns.Load() < 3 {
						t.Errorf("hapsuper connected %d times to the fake master CLI: the test did not test it", fake.conns.Load())
					}
				}
				if r.code != 0 {
					t.Errorf("exit code %d, want 0 (HAProxy took the soft stop)", r.code)
				}
				r.checkInBudget(b, b.exitLimit())
			})
		}
	})
}

// fakeCLI is a unix socket of the test's in place of the master CLI. Each
// connection gets answer (garbage); a nil answer holds the connection open,
// unanswered, until the test ends.
type fakeCLI struct {
	ln    net.Listener
	conns atomic.Int64
	wg    sync.WaitGroup
	mu    sync.Mutex
	held  []net.Conn
}

func listenFakeCLI(t *testing.T, path string, answer func(n int64) []byte) *fakeCLI {
	t.Helper()
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatalf("listen on %s in place of the master CLI: %v", path, err)
	}
	f := &fakeCLI{ln: ln}
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		for {
			c, err := ln.Accept()
			if errors.Is(err, net.ErrClosed) {
				return
			}
			if err != nil {
				continue
			}
			n := f.conns.Add(1)
			if answer == nil {
				f.mu.Lock()
				f.held = append(f.held, c)
				f.mu.Unlock()
				continue
			}
			f.wg.Add(1)
			go func() {
				defer f.wg.Done()
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(2 * time.Second))
				// Read the command line first, as the master does, then lie.
				_, _ = c.Read(make([]byte, 4096))
				_, _ = c.Write(answer(n))
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		f.mu.Lock()
		for _, c := range f.held {
			c.Close()
		}
		f.mu.Unlock()
		f.wg.Wait()
	})
	return f
}

// answerGarbage returns, in turn: random bytes, a 128 KiB line without an
// end, an error answer, and the start of a `show proc` cut before its end.
func answerGarbage(n int64) []byte {
	switch n % 4 {
	case 0:
		b := make([]byte, 4096)
		_, _ = rand.Read(b)
		return b
	case 1:
		return []byte(strings.Repeat("A", 128<<10))
	case 2:
		return []byte("Unknown command, but this is not the master either.\n\n")
	default:
		return []byte("#<PID>          <type>          <reloads>       <uptime>        <version>\n1 master 0 [failed: 0] 0d00h00m01s 2.6.12\n# workers\n")
	}
}
