package drain

import (
	"testing"
	"time"
)

// When the traffic stops, the drain ends exactly QuietPeriod after the last
// change, at the reading that proves it, and not one poll earlier.
func TestQuietEndsExactlyQuietPeriodAfterLastRequest(t *testing.T) {
	r := serving(t, settings)
	r.poll(0, w(100, 0))
	r.stop(0)
	for i, off := range []time.Duration{sec(0.5), sec(1), sec(1.5), sec(2), sec(2.5), sec(3)} {
		r.want(off, r.poll(off, w(100, uint64(i+1))), None)
	}
	r.pollIdle(sec(3.5), sec(4.5), poll, w(100, 6))
	q := r.d.Status(at(sec(4.5))).Conditions[0]
	if q.Name != ConditionQuiet || q.Met || !q.Since.Equal(at(sec(3))) || q.Detail != "last request 1.5s ago" {
		t.Fatalf("quiet condition at 4.5s = %+v, want pending since 3s", q)
	}
	r.want(sec(5), r.poll(sec(5), w(100, 6)), SoftStop)
	r.wantEnd(sec(5), ReasonQuiet, "")
}

// A drain lasts at least QuietPeriod from the stop request, even with no
// traffic at all: the quiet clock starts at the stop.
func TestQuietClockStartsAtStopRequest(t *testing.T) {
	r := serving(t, settings)
	r.poll(0, w(100, 7))
	r.stop(sec(1))
	r.pollIdle(sec(1.5), sec(2.5), poll, w(100, 7))
	r.want(sec(3), r.poll(sec(3), w(100, 7)), SoftStop)
	r.wantEnd(sec(3), ReasonQuiet, "")
}

// Quiet is proved by a reading, not by the clock: a Tick after QuietPeriod
// with no reading since does not end the drain; the next reading does.
func TestQuietNeedsReadingAtEndOfPeriod(t *testing.T) {
	r := serving(t, settings)
	r.poll(0, w(100, 7))
	r.stop(0)
	r.want(sec(1.5), r.poll(sec(1.5), w(100, 7)), None)
	r.want(sec(2.5), r.d.Tick(at(sec(2.5))), None)
	r.want(sec(2.6), r.poll(sec(2.6), w(100, 7)), SoftStop)
}

// A reload during the drain: the new worker appears at zero (not traffic),
// its first non-zero counter is traffic, and the old worker vanishing is not.
func TestReloadMidDrain(t *testing.T) {
	r := serving(t, settings)
	r.poll(0, w(100, 50))
	r.stop(0)
	old := Worker{PID: 100, Old: true, Requests: 50}
	r.want(sec(1), r.poll(sec(1), old, w(200, 0)), None)
	r.want(sec(1.5), r.poll(sec(1.5), old, w(200, 3)), None)
	r.want(sec(2), r.poll(sec(2), w(200, 3)), None) // would be quiet without the new worker's traffic
	r.pollIdle(sec(2.5), sec(3), poll, w(200, 3))
	r.want(sec(3.5), r.poll(sec(3.5), w(200, 3)), SoftStop)
	r.wantEnd(sec(3.5), ReasonQuiet, "")
}

// An old worker that finishes and vanishes mid-drain does not delay quiet.
func TestVanishingWorkerIsNotAChange(t *testing.T) {
	r := serving(t, settings)
	r.poll(0, w(100, 50))
	r.stop(0)
	r.want(sec(1), r.poll(sec(1), Worker{PID: 100, Old: true, Requests: 50}, w(200, 0)), None)
	r.want(sec(1.5), r.poll(sec(1.5), w(200, 0)), None)
	r.want(sec(2), r.poll(sec(2), w(200, 0)), SoftStop)
}

// A worker first seen (after the first reading) with traffic already counted
// is a change: its requests came after the previous reading.
func TestNewWorkerWithTrafficIsAChange(t *testing.T) {
	r := serving(t, settings)
	r.poll(0, w(100, 5))
	r.stop(0)
	r.want(sec(1), r.poll(sec(1), w(100, 5), w(300, 7)), None)
	r.pollIdle(sec(2), sec(2.5), poll, w(100, 5), w(300, 7))
	r.want(sec(3), r.poll(sec(3), w(100, 5), w(300, 7)), SoftStop)
}

// A counter that goes down for the same PID (a reset) counts as a change.
func TestCounterResetIsAChange(t *testing.T) {
	r := serving(t, settings)
	r.poll(0, w(100, 50))
	r.stop(0)
	r.want(sec(1), r.poll(sec(1), w(100, 10)), None)
	if d := r.d.Status(at(sec(1.5))).Conditions[0].Detail; d != "counter reset 0.5s ago" {
		t.Fatalf("quiet detail %q, want counter reset", d)
	}
	r.pollIdle(sec(2), sec(2.5), poll, w(100, 10))
	r.want(sec(3), r.poll(sec(3), w(100, 10)), SoftStop)
}

// A failed reading hides nothing when the readings around it show the
// same workers: their counters are cumulative, so unchanged ones served
// nothing in between.
func TestBlindSpellWithTheSameWorkersIsNoChange(t *testing.T) {
	r := serving(t, settings)
	r.poll(0, w(100, 5))
	r.stop(0)
	r.want(sec(0.5), r.poll(sec(0.5), w(100, 5)), None)
	r.want(sec(1), r.fail(sec(1)), None)
	r.want(sec(1.5), r.poll(sec(1.5), w(100, 5)), None)
	r.want(sec(2), r.poll(sec(2), w(100, 5)), SoftStop)
	r.wantEnd(sec(2), ReasonQuiet, "")
}

// A worker that left while the counters could not be read may have served
// unseen: without its stop line, quiet needs a full QuietPeriod of
// successful readings after the spell.
func TestFailedObservationDelaysQuiet(t *testing.T) {
	r := serving(t, settings)
	r.poll(0, w(100, 5))
	r.stop(0)
	r.want(sec(0.5), r.poll(sec(0.5), w(100, 5)), None)
	r.want(sec(1), r.fail(sec(1)), None)
	r.want(sec(1.5), r.poll(sec(1.5), w(200, 0)), None)
	r.want(sec(2), r.poll(sec(2), w(200, 0)), None) // quiet from the stop, were it not for the spell
	r.pollIdle(sec(2.5), sec(3), poll, w(200, 0))
	if d := r.d.Status(at(sec(3))).Conditions[0].Detail; d != "counters readable again 1.5s ago" {
		t.Fatalf("quiet detail %q", d)
	}
	r.want(sec(3.5), r.poll(sec(3.5), w(200, 0)), SoftStop)
}
