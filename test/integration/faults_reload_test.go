package integration

import (
	"context"
	"fmt"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hapsuper/hapsuper/test/harness"
)

// TestFault_ReloadStormDuringDrain: from the start of the drain until
// hapsuper exits, a reload comes every 200 ms, alternately asked of hapsuper
// (SIGHUP) and of the master CLI (`reload`, as a controller does), while a
// client sends for 3 s. Nothing the client sent fails; the drain does not
// end while the client sends, and ends after it stops (quiet, or at the
// bound when the master's re-executions keep failing polls); hapsuper exits
// before the SIGKILL would be due (0, or after the hard stop when the
// storm's reloads kept a new worker serving), reaps every child meanwhile,
// and leaves no HAProxy process.
func TestFault_ReloadStormDuringDrain(t *testing.T) {
	eachHAProxy(t, func(t *testing.T, h haproxyVersion) {
		b := fast
		cfg := newConfig(t)
		s := serve(t, h, cfg, b.flags()...)
		// Sample hapsuper's zombie children every 50 ms, noting when each was
		// first seen: one seen for longer than zombieGrace was not reaped.
		firstSeen, long := map[int]time.Time{}, map[int]string{}
		zombies := startLoop(t, "zombie watch", 50*time.Millisecond, 30*time.Second, func(context.Context, *recorder) {
			for _, p := range zombiesOf(s.Pid()) {
				if first, ok := firstSeen[p.pid]; !ok {
					firstSeen[p.pid] = time.Now()
				} else if d := time.Since(first); d > zombieGrace {
					long[p.pid] = fmt.Sprintf("pid %d (%s) a zombie for at least %s", p.pid, p.comm, d)
				}
			}
		})
		var storm *reloadStorm
		r := s.drain(cfg.webAddr(), syscall.SIGTERM, func(r *drainRun) {
			storm = startReloadStorm(t, s, 200*time.Millisecond, true)
			time.Sleep(3 * time.Second)
			checkNotEnded(s, r.term, "")
		})
		storm.stop()
		zombies.stop()
		last := r.cont.rec.lastStart()
		t.Logf("%s; %d reloads logged by hapsuper, %d ignored once stopping", storm, len(s.All("reload")),
			len(s.All("reload ignored: HAProxy is stopping")))
		t.Logf("client stopped %s after SIGTERM; %d hard stop", last.Sub(r.term), len(s.All("hard stop")))
		t.Logf("zombie children of hapsuper: %d seen, %d for longer than %s", len(firstSeen), len(long), zombieGrace)

		// Both channels must have reloaded HAProxy during the drain. The
		// master refuses CLI connections while it re-executes, and on a
		// loaded machine it re-executes longer, so fewer CLI reloads are
		// answered (4 of 15 once in CI): the bar counts reloads delivered.
		if storm.sighups.Load() < 5 || storm.cliOK.Load() < 2 || storm.sighups.Load()+storm.cliOK.Load() < 8 {
			t.Errorf("%s: too few reloads to call it a storm (want ≥ 5 SIGHUP, ≥ 2 answered CLI reloads, ≥ 8 in all)", storm)
		}
		// HAProxy 3.x replaced every 200 ms sometimes resets a fresh
		// connection a worker had accepted as it was replaced (2 of 49
		// requests once on 3.2 in a full run, both seconds before the
		// soft stop; 0 in 6 runs alone): the reloads' doing, which a drain
		// neither causes nor can prevent. Up to 3 such resets before the
		// soft stop are logged, not failed; every other request must
		// succeed.
		reloadResets := r.cont.rec.where(func(o outcome) bool {
			return o.kind == harness.KindReset && !o.reused && o.start.Before(r.soft.At)
		})
		if len(reloadResets) > 0 {
			t.Logf("%d fresh connections reset during the reload storm before the soft stop (HAProxy's reloads):%s", len(reloadResets), describe(reloadResets, 3))
		}
		if len(reloadResets) > 3 {
			t.Errorf("%d fresh connections reset before the soft stop: more than reloads every 200 ms explain", len(reloadResets))
		}
		if bad := r.cont.rec.where(func(o outcome) bool {
			return o.kind != harness.KindOK && !(o.kind == harness.KindReset && !o.reused && o.start.Before(r.soft.At))
		}); len(bad) > 0 {
			t.Errorf("%s: %d failed requests:%s", r.cont.rec.name, len(bad), describe(bad, 5))
		}
		if before := r.cont.rec.where(func(o outcome) bool { return o.start.Before(r.soft.At) }); len(before) < 10 {
			t.Errorf("%s: only %d requests before the soft stop: too few to mean anything", r.cont.rec.summary(), len(before))
		}
		checkNotCutShort(t, r.ended, last, r.boundAt())
		if !r.ended.At.After(last) {
			t.Errorf("drain ended before the client's last request")
		}
		// The master CLI's reloads go on after the soft stop, each with a
		// new worker that needs the SIGUSR1 again: on a loaded machine
		// the last one can still serve at grace − margin (once on 2.6 in
		// a full run), and the hard stop (exit 128+SIGTERM) ends it then,
		// still before the SIGKILL. Without a hard stop the exit is 0.
		switch hard := len(s.All("hard stop")); {
		case r.code == 0:
		case r.code == 128+int(syscall.SIGTERM) && hard > 0:
			t.Logf("exit code %d after the hard stop: the storm's reloads after the soft stop kept a worker serving", r.code)
		default:
			t.Errorf("exit code %d with %d hard stop, want 0 (or %d after a hard stop)", r.code, hard, 128+int(syscall.SIGTERM))
		}
		for _, z := range long {
			t.Errorf("zombie child of hapsuper not reaped within %s: %s", zombieGrace, z)
		}
		checkExitInBudget(t, b, r.term, r.exitAt, b.exitLimit())
		checkNoHAProxyLeft(t, s.dir)
	})
}

// reloadStorm reloads HAProxy every interval until stopped, hapsuper
// exits or 30 s pass: with sighup, SIGHUP to hapsuper and `reload` on the
// master CLI in turn; else only the latter.
type reloadStorm struct {
	*client
	sighups, cliOK, cliFailed atomic.Int64
}

func startReloadStorm(t *testing.T, s *supervisor, interval time.Duration, sighup bool) *reloadStorm {
	r := &reloadStorm{}
	i := 0
	r.client = startLoop(t, "reload storm", interval, 30*time.Second, func(context.Context, *recorder) {
		i++
		switch {
		case s.Exited():
		case sighup && i%2 == 1:
			if syscall.Kill(s.Pid(), syscall.SIGHUP) == nil {
				r.sighups.Add(1)
			}
		default:
			// The master refuses connections while it re-executes (every
			// version; run alone, the four versions' storms met a
			// re-execution from the SIGHUP before on 13 of 14 tries), so
			// the reload is tried again within the interval, as a
			// controller retries.
			for try := 0; ; try++ {
				if _, err := masterCommand(s.master, "reload"); err == nil {
					r.cliOK.Add(1)
					break
				} else if try == 3 || s.Exited() {
					r.cliFailed.Add(1)
					break
				}
				time.Sleep(interval / 5)
			}
		}
	})
	return r
}

func (r *reloadStorm) String() string {
	return fmt.Sprintf("reload storm: %d SIGHUP, %d master CLI reloads answered, %d refused",
		r.sighups.Load(), r.cliOK.Load(), r.cliFailed.Load())
}

// zombieGrace is how long a child of hapsuper may stay a zombie: the time
// for its SIGCHLD (or the loop's tick, when signals coalesce) to be handled.
const zombieGrace = 500 * time.Millisecond
