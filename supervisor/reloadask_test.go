package supervisor

import (
	"syscall"
	"testing"
	"time"

	"github.com/hapsuper/hapsuper/status"
)

// Scenario tests of reloads asked on the status socket (gopherd, s6-svc):
// each is answered with the outcome of the reload that serves it, and of
// no other.

// ask hands a reload asked by origin to the loop at off.
func (sc *scenario) ask(off time.Duration, origin string) status.ReloadAsk {
	a := status.ReloadAsk{Origin: origin, Done: make(chan status.ReloadReply, 1)}
	sc.event(off, func() { sc.l.askReload(a, sc.l.now()) })
	return a
}

// answered returns a's answer, failing when there is none yet.
func answered(t *testing.T, a status.ReloadAsk) status.ReloadReply {
	t.Helper()
	select {
	case r := <-a.Done:
		return r
	default:
		t.Fatalf("the reload asked by %s has no answer", a.Origin)
		return status.ReloadReply{}
	}
}

// notAnswered fails when a has an answer already.
func notAnswered(t *testing.T, asks ...status.ReloadAsk) {
	t.Helper()
	for _, a := range asks {
		select {
		case r := <-a.Done:
			t.Fatalf("the reload asked by %s was answered too early: %+v", a.Origin, r)
		default:
		}
	}
}

// Two reloads asked at once: the second, asked while the first one's check
// runs (it read the files before), waits for a check of its own; the first
// gets its new worker, the second its refusal, each once. Two asked during
// the same check share the next one.
func TestReloadAskAnsweredByItsOwnReload(t *testing.T) {
	sc := newScenario(t, testSettings, nil)
	a := sc.ask(sec(1), "gopherd")
	b := sc.ask(sec(1.5), "s6-svc")
	c := sc.ask(sec(1.6), "gopherd")
	if sc.checks != 1 {
		t.Fatalf("%d checks started, want 1 while the first runs", sc.checks)
	}
	sc.checkDone(sec(2), 0, "") // a's check passes: sent; b's and c's starts
	sc.wantSent("SIGUSR2@2s")
	notAnswered(t, a, b, c)
	sc.reloadCount = 1
	sc.poll(sec(2.2), worker{pid: 101}, worker{pid: 100, old: true})
	if r := answered(t, a); r.Reload == nil || r.Reload.Result != status.ReloadOK || r.Reload.Worker != 101 || r.Reload.Origin != "gopherd" {
		t.Fatalf("a's answer %+v, want ok with worker 101 from gopherd", r)
	}
	notAnswered(t, b, c)
	sc.checkDone(sec(3), 1, alertOutput)
	for _, x := range []status.ReloadAsk{b, c} {
		if r := answered(t, x); r.Reload == nil || r.Reload.Result != status.ReloadRefused {
			t.Errorf("%s's answer %+v, want its own reload refused", x.Origin, r)
		}
	}
	notAnswered(t, a, b, c) // once each
}

// A reload sent while another is in flight supersedes it: whoever waited
// for the first gets the outcome of the second, which serves their files.
func TestReloadAskSuperseded(t *testing.T) {
	sc := newScenario(t, testSettings, nil)
	a := sc.ask(sec(1), "gopherd")
	b := sc.ask(sec(1.1), "gopherd")
	sc.checkDone(sec(1.2), 0, "")
	sc.checkDone(sec(1.3), 0, "") // b's passes before a's lands
	sc.wantSent("SIGUSR2@1.2s", "SIGUSR2@1.3s")
	notAnswered(t, a, b)
	sc.reloadCount = 2
	sc.poll(sec(1.5), worker{pid: 102}, worker{pid: 100, old: true})
	for _, x := range []status.ReloadAsk{a, b} {
		if r := answered(t, x); r.Reload == nil || r.Reload.Worker != 102 {
			t.Errorf("answer %+v, want the reload that landed (worker 102)", r)
		}
	}
}

// Once HAProxy is stopping, a reload asked is answered at once with why
// none is sent; one that passes its check once the soft stop was sent is
// answered so too.
func TestReloadAskWhileStopping(t *testing.T) {
	sc := newScenario(t, testSettings, nil)
	sc.signal(sec(1), syscall.SIGTERM)
	a := sc.ask(sec(2.9), "gopherd")
	sc.poll(sec(3), worker{pid: 100}) // quiet since 1s: soft stop
	sc.wantSent("SIGUSR1@3s")
	b := sc.ask(sec(3.05), "s6-svc")
	if r := answered(t, b); r.Error == "" || r.Reload != nil {
		t.Errorf("answer while stopping %+v, want an error", r)
	}
	sc.checkDone(sec(3.1), 0, "")
	sc.wantSent("SIGUSR1@3s")
	if r := answered(t, a); r.Error == "" {
		t.Errorf("answer of a check passed while stopping %+v, want an error", r)
	}
}

// A reload that passes its check before the master CLI was first read
// (right after a readiness notification) is held until that read: sent
// earlier, it fell into the reload count's baseline, was never seen, and
// failed "counted no reload" 10 s later while its worker served.
func TestReloadHeldUntilTheFirstSample(t *testing.T) {
	sc := newScenario(t, testSettings, nil)
	sc.l.reloads = newReloads() // no sample read yet
	a := sc.ask(sec(0.1), "gopherd")
	sc.checkDone(sec(0.2), 0, "")
	sc.wantSent()
	b := sc.ask(sec(0.25), "s6-svc") // queued behind the held one
	sc.poll(sec(0.3), worker{pid: 100})
	sc.wantSent("SIGUSR2@300ms")
	if sc.checks != 2 {
		t.Errorf("%d checks, want the queued one started once the held one was sent", sc.checks)
	}
	sc.reloadCount = 1
	sc.poll(sec(0.4), worker{pid: 101}, worker{pid: 100, old: true})
	if r := answered(t, a); r.Reload == nil || r.Reload.Result != status.ReloadOK || r.Reload.Worker != 101 {
		t.Fatalf("answer %+v, want ok with worker 101", r)
	}
	notAnswered(t, b)
}
