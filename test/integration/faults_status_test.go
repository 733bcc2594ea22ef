package integration

import (
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
)

// statusFloodConns is how many connections flood the status socket at once.
const statusFloodConns = 200

// TestFault_StatusSocketFlood: 200 connections at once keep the status
// socket busy for the first 1.5 s of the drain (a third sending nothing, a
// third binary garbage, a third a 256 KiB line) while a client sends for 3 s.
// The drain does not notice: it ends quiet within the usual window after the
// client stops, and hapsuper exits 0. `hapsuper status --json` answers
// within a few seconds during the flood or right after it (during it, the
// 16 request slots and their 2 s timeout make it wait behind the flood).
func TestFault_StatusSocketFlood(t *testing.T) {
	eachHAProxy(t, func(t *testing.T, h haproxyVersion) {
		b := fast
		cfg := newConfig(t)
		s := serve(t, h, cfg, b.flags()...)
		s.waitWorkers()
		flood := startStatusFlood(s.status, statusFloodConns)
		queries := startStatusQueries(s)
		var floodEnd time.Time
		var after statusQuery
		r := s.drain(cfg.webAddr(), syscall.SIGTERM, func(r *drainRun) {
			time.Sleep(time.Until(r.term.Add(1500 * time.Millisecond)))
			floodEnd = flood.stop()
			queries.stop()
			// Right after the flood, the drain still under way: the status
			// must answer within a few seconds.
			for end := time.Now().Add(5 * time.Second); time.Now().Before(end) && !s.Exited(); time.Sleep(100 * time.Millisecond) {
				if after = queryStatus(s); after.ok {
					break
				}
			}
			time.Sleep(time.Until(r.term.Add(3 * time.Second)))
		})
		during := queries.all()
		t.Logf("%s; flood %s..%s after SIGTERM", flood, flood.started.Sub(r.term), floodEnd.Sub(r.term))
		t.Logf("status --json during the flood: %s; right after: %s (%s after the flood)", describeQueries(during), after, after.start.Sub(floodEnd))

		if flood.opened.Load() < statusFloodConns {
			t.Errorf("%s: fewer than %d connections, not a flood", flood, statusFloodConns)
		}
		checkQuietEnd(t, r.ended, r.cont.rec.lastStart())
		answered := after.ok && after.took <= 3*time.Second
		for _, q := range during {
			answered = answered || q.ok && q.took <= 3*time.Second
		}
		if !answered {
			t.Errorf("hapsuper status --json answered within 3 s neither during the flood nor right after it")
		}
		if r.code != 0 {
			t.Errorf("exit code %d, want 0", r.code)
		}
		r.checkInBudget(b, b.exitLimit())
	})
}

// statusFlood keeps n connections to the status socket busy until stopped:
// each one, in a loop, connects, sends its kind of load, and reads until the
// server closes.
type statusFlood struct {
	started            time.Time
	opened, dialFailed atomic.Int64
	quit               chan struct{}
	wg                 sync.WaitGroup
	mu                 sync.Mutex
	live               map[net.Conn]bool
}

func startStatusFlood(path string, n int) *statusFlood {
	f := &statusFlood{started: time.Now(), quit: make(chan struct{}), live: map[net.Conn]bool{}}
	garbage := make([]byte, 4096)
	_, _ = rand.Read(garbage)
	longLine := []byte(strings.Repeat("x", 256<<10))
	for i := range n {
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			for {
				select {
				case <-f.quit:
					return
				default:
				}
				c, err := net.DialTimeout("unix", path, time.Second)
				if err != nil {
					f.dialFailed.Add(1)
					select {
					case <-f.quit:
						return
					case <-time.After(50 * time.Millisecond):
					}
					continue
				}
				f.opened.Add(1)
				f.track(c, true)
				_ = c.SetDeadline(time.Now().Add(10 * time.Second))
				switch i % 3 {
				case 1:
					_, _ = c.Write(garbage)
				case 2:
					_, _ = c.Write(longLine)
				}
				_, _ = io.Copy(io.Discard, c)
				f.track(c, false)
				c.Close()
			}
		}()
	}
	return f
}

// track records the open connections, so that stop can close them at once.
func (f *statusFlood) track(c net.Conn, open bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	select {
	case <-f.quit: // stop has closed the others already
		c.Close()
		return
	default:
	}
	if open {
		f.live[c] = true
	} else {
		delete(f.live, c)
	}
}

// stop closes every flood connection and returns when it did.
func (f *statusFlood) stop() time.Time {
	close(f.quit)
	f.mu.Lock()
	for c := range f.live {
		c.Close()
	}
	f.mu.Unlock()
	f.wg.Wait()
	return time.Now()
}

func (f *statusFlood) String() string {
	return fmt.Sprintf("status flood: %d connections of %d clients, %d dials failed",
		f.opened.Load(), statusFloodConns, f.dialFailed.Load())
}

// statusQuery is one run of `hapsuper status --json`.
type statusQuery struct {
	start time.Time
	took  time.Duration
	ok    bool
	err   string
}

func (q statusQuery) String() string {
	if q.start.IsZero() {
		return "none"
	}
	if q.ok {
		return fmt.Sprintf("answered in %s", q.took.Round(time.Millisecond))
	}
	return fmt.Sprintf("failed after %s (%s)", q.took.Round(time.Millisecond), q.err)
}

// queryStatus runs `hapsuper status --json` once (bounded to 5 s).
func queryStatus(s *supervisor) statusQuery {
	q := statusQuery{start: time.Now()}
	out, errs, code := s.runStatus("--json")
	q.took = time.Since(q.start)
	q.ok = code == 0 && strings.Contains(out, `"phase"`)
	if !q.ok {
		q.err = fmt.Sprintf("exit %d: %s", code, strings.TrimSpace(errs))
	}
	return q
}

// statusQueries runs `hapsuper status --json` back to back until stopped.
type statusQueries struct {
	quit, done chan struct{}
	mu         sync.Mutex
	res        []statusQuery
}

func startStatusQueries(s *supervisor) *statusQueries {
	q := &statusQueries{quit: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(q.done)
		for {
			select {
			case <-q.quit:
				return
			case <-time.After(200 * time.Millisecond):
			}
			r := queryStatus(s)
			q.mu.Lock()
			q.res = append(q.res, r)
			q.mu.Unlock()
		}
	}()
	return q
}

func (q *statusQueries) stop() {
	close(q.quit)
	<-q.done
}

func (q *statusQueries) all() []statusQuery {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]statusQuery(nil), q.res...)
}

// describeQueries summarises the queries: how many answered, and the
// slowest answer.
func describeQueries(qs []statusQuery) string {
	ok, slowest := 0, time.Duration(0)
	var firstErr string
	for _, q := range qs {
		if q.ok {
			ok++
			slowest = max(slowest, q.took)
		} else if firstErr == "" {
			firstErr = q.err
		}
	}
	s := fmt.Sprintf("%d of %d answered (slowest %s)", ok, len(qs), slowest.Round(time.Millisecond))
	if firstErr != "" {
		s += "; first failure: " + firstErr
	}
	return s
}
