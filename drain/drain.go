package drain

import (
	"fmt"
	"math/bits"
	"strings"
	"time"
)

// Drain is the stop protocol of one HAProxy master. A stop request
// (StopRequested) moves it from Starting or Serving to Draining, where it keeps
// the listeners open until two conditions hold together at one Tick: quiet (no
// worker served a request for QuietPeriod, proved by a reading of the counters
// taken that long after the last change; once routing is withdrawn, no new
// connection for WithdrawnQuietPeriod) and routing (State off, withdrawn or
// unverified; pending blocks) — or until the bound (MaxWait after the stop
// request) passes; Tick then returns SoftStop once and the phase is Stopping,
// and when the deadline (GracePeriod-Margin after the stop request) passes Tick
// returns HardStop once. MasterExited ends it in any phase.
//
// Phases and transitions:
//
//	Starting --Ready--> Serving --StopRequested--> Draining --Tick: SoftStop--> Stopping --Tick at deadline: HardStop
//	Starting --StopRequested--> Draining (HAProxy not ready yet: same rules)
//	any phase --MasterExited--> Exited
//
// A second StopRequested returns false and changes nothing: timers are not
// restarted. Nothing is latched: the conditions are evaluated afresh at each
// Tick, so routing that goes back from withdrawn to pending (kube-proxy falls
// back to terminating endpoints) blocks again.
//
// Quiet. The counters are tracked per worker PID in every phase, so the
// baseline exists when the stop comes. A change is a PID whose Requests rose
// since its previous reading, a PID seen for the first time with Requests > 0
// (a new worker from a reload starts at zero), or a counter that went down (a
// reset). A PID that disappears between two successful readings is not a
// change. A failed Observation may hide one: the first successful reading
// ever is a change at its At, and the one after failures is unless every
// worker is accounted for across the spell (the same PIDs' counters, new
// ones from zero, one that left by its stop line, WorkerStopped: quiet.go),
// so a reload alone never restarts quiet and blindness never lets traffic
// go unseen. The quiet clock starts at the stop request: a drain lasts at
// least its quiet period (confirmed routing, below: until the evidence
// plus the allowance, when the stop came by then), and what happened
// before the stop does not matter. Quiet is proved by a reading, never by the clock alone: the
// latest reading succeeded and was taken QuietPeriod or more after the last
// change, so the supervisor should Tick right after each Observe.
//
// The quiet rule follows the routing state at each Tick. Off, pending or
// unverified: Worker.Requests counts, every request on every connection,
// since a request on an old connection may mean routing has not moved.
// Withdrawn (every observed path): Worker.Connections counts, new
// connections and the requests of frontends whose soft stop is not
// graceful, for WithdrawnQuietPeriod; requests on connections opened before
// the withdrawal are no routing signal, and the soft stop ends those
// connections cleanly (Connection: close, GOAWAY). Both clocks start at the
// stop request and are kept in every state, so routing that flaps from
// withdrawn back to pending falls back to the requests' clock at once.
//
// Confirmed routing. Where every node's kube-proxy confirmed the withdrawal
// (Routing.Confirmed), the confirmation dates itself: its evidence is the
// latest completion of the last node's confirming sync (Routing.SyncedBy,
// the earliest of the confirmed spell, never after its first verdict). A
// change of Connections shown by a reading taken by the evidence plus
// Settings.InFlightAllowance (a SYN already on the wire, counted up to two
// polls later) is explained by it and needs no further window; a later one
// is unexplained, late (the audit), and waits WithdrawnQuietPeriod. The soft
// stop comes at the later of the evidence plus the allowance and the last
// unexplained change plus the period. The API alone or a balancer never
// confirms: there the rule above stands.
//
// The audit. Once routing is withdrawn, every new connection counted
// (Worker.Accepted) after Settings.InFlightWindow (confirmed routing: after
// the evidence plus Settings.InFlightAllowance) is a late arrival: some
// path the verdict did not see still sends here. It moves the quiet clock
// like any connection; a drain that saw one ends ReasonUnverified instead of
// routed-away (lb-marked-down, withdrawn-in-api), its Detail naming the late
// arrivals (audit.go).
//
// Routing. The latest SetRouting counts; before any, routing is off. The
// reason a drain ends on its conditions follows the routing state: off gives
// ReasonQuiet, withdrawn ReasonRoutedAway (ReasonWithdrawnInAPI when
// Routing.APIOnly, ReasonLBMarkedDown when Routing.Balancer, whose Detail
// then ends with the last new connection), unverified ReasonUnverified (the Detail names what was
// not observed).
//
// Times. Deadline = stop request + grace - Margin, where grace is
// GracePeriod or the pod's own grace period (SetPodGracePeriod) when that is
// shorter; it may be learnt before the stop request or during the drain.
// Bound = stop + MaxWait × (grace - Margin) / (GracePeriod - Margin), kept
// between the stop request and the Deadline: a shorter grace period shortens
// the drain's share and the soft stop's share of the budget in proportion.
// With no budget left (grace ≤ Margin) the bound is the stop request and the
// deadline is already past: soft stop, then hard stop at the next Tick. At the
// bound the drain ends with ReasonBound, whose Detail lists what was pending,
// or ReasonUnavailable when the last observation failed or no observation
// succeeded within the last QuietPeriod (HAProxy stopped answering). A
// last observation that failed while HAProxy reloads (Observation.Reloading:
// the master is alive and re-executes) is not HAProxy that stopped
// answering: that bound is ReasonBound, its Detail saying the counters were
// unreadable during the reload.
//
// Tick returns at most one action per call and each action at most once.
// When both are due at once (a deadline already past), SoftStop comes first
// and HardStop at the next Tick. Once the master exited no action is due.
// Not safe for concurrent use: one goroutine feeds it.
type Drain struct {
	s     Settings
	phase Phase

	stopAt     time.Time      // stop request; zero while none
	podGrace   *time.Duration // the pod's own grace period; nil while unknown
	deadline   time.Time
	boundAt    time.Time
	softStopAt time.Time
	hardStopAt time.Time // zero until HardStop was returned
	exitedAt   time.Time

	reason   Reason
	detail   string
	routing  Routing   // fed, with the pod's own check: what the drain decides on
	podCheck *PodCheck // nil: none fed
	// evidence is the confirmation's evidence over the current confirmed
	// spell (Routing.Confirmed): the earliest SyncedBy, never after the
	// spell's first verdict; zero while routing is not confirmed.
	evidence time.Time
	q        quiet
	a        audit
}

// New returns a Drain in phase Starting, with routing off until SetRouting.
func New(s Settings) *Drain {
	return &Drain{
		s:       s,
		phase:   Starting,
		routing: Routing{State: RoutingOff},
		q:       newQuiet(s),
		a:       audit{window: s.InFlightWindow, allow: s.InFlightAllowance, poll: s.PollInterval},
	}
}

// Ready records that HAProxy answers: Starting -> Serving. It does nothing in
// any other phase.
func (d *Drain) Ready(now time.Time) {
	if d.phase == Starting {
		d.phase = Serving
	}
}

// StopRequested starts the drain: Serving/Starting -> Draining. It returns
// false when a drain is already under way or the master is gone (a second
// request changes nothing, timers included).
func (d *Drain) StopRequested(now time.Time) bool {
	if d.phase != Starting && d.phase != Serving {
		return false
	}
	d.phase, d.stopAt = Draining, now
	d.schedule()
	d.q.start(now)
	return true
}

// SetPodGracePeriod feeds the pod's own grace period (its
// deletionGracePeriodSeconds, once routing/ sees the deletion), before the
// stop request or during the drain. One shorter than GracePeriod moves the
// deadline earlier and the bound in proportion; a longer one changes nothing. It
// reports whether the grace period the drain uses got shorter.
func (d *Drain) SetPodGracePeriod(g time.Duration) bool {
	if g >= d.grace() {
		return false
	}
	d.podGrace = &g
	if !d.stopAt.IsZero() {
		d.schedule()
	}
	return true
}

// grace is the grace period the deadline counts from the stop request.
func (d *Drain) grace() time.Duration {
	if d.podGrace != nil && *d.podGrace < d.s.GracePeriod {
		return *d.podGrace
	}
	return d.s.GracePeriod
}

// schedule derives the deadline and the bound from the stop request and
// the grace period.
func (d *Drain) schedule() {
	budget := d.grace() - d.s.Margin
	d.deadline = d.stopAt.Add(budget)
	bound := d.stopAt.Add(drainShare(d.s.MaxWait, budget, d.s.GracePeriod-d.s.Margin))
	if d.deadline.Before(bound) {
		bound = d.deadline
	}
	if bound.Before(d.stopAt) {
		bound = d.stopAt
	}
	d.boundAt = bound
}

// drainShare is the drain's share of a budget that a shorter grace period
// cut from the full one: maxWait × budget / full, exact to the nanosecond
// (the product of two durations overflows int64). No budget leaves none; a
// full budget leaves maxWait.
func drainShare(maxWait, budget, full time.Duration) time.Duration {
	switch {
	case budget <= 0 || maxWait <= 0:
		return 0
	case budget >= full:
		return maxWait
	}
	// budget < full, so the quotient is less than maxWait: it fits.
	hi, lo := bits.Mul64(uint64(maxWait), uint64(budget))
	q, _ := bits.Div64(hi, lo, uint64(full))
	return time.Duration(q)
}

// Observe feeds one poll of HAProxy's counters, in any phase.
// It returns how many late arrivals (audit.go) the poll showed.
func (d *Drain) Observe(o Observation) int {
	d.q.observe(o)
	return d.a.observe(o, d.phase == Draining)
}

// WorkerStopped feeds a worker's stop line ("Proxy web stopped
// (cumulated conns: FE: 65, …)"): frontend fe of worker pid had accepted
// opened connections when the worker stopped accepting. It accounts for a
// worker that leaves while the counters cannot be read (quiet.go).
func (d *Drain) WorkerStopped(pid int, fe string, opened uint64, now time.Time) {
	d.q.stopped(pid, fe, opened, now)
}

// SetRouting feeds the routing condition; the latest one counts, combined
// with the pod's own check once SetPodCheck fed one. It returns how many
// late arrivals (audit.go) a confirmation found in the readings taken
// before it came.
func (d *Drain) SetRouting(r Routing, now time.Time) int {
	d.routing = withPodCheck(r, d.podCheck)
	d.confirm(now)
	return d.a.routing(d.routing, now, d.evidence)
}

// confirm follows the confirmation's evidence. A verdict dates the syncs it
// rests on; the earliest date of a confirmed spell stands, since rules that
// dropped the pod stay dropped until a verdict says otherwise (a newer sync
// must not move it later), and the verdict's own instant bounds it.
func (d *Drain) confirm(now time.Time) {
	r := d.routing
	if r.State != RoutingWithdrawn || !r.Confirmed || r.APIOnly || r.Balancer {
		d.evidence = time.Time{}
		return
	}
	ev := now
	if !r.SyncedBy.IsZero() && r.SyncedBy.Before(now) {
		ev = r.SyncedBy
	}
	if d.evidence.IsZero() || ev.Before(d.evidence) {
		d.evidence = ev
	}
}

// explainedBy is the instant until which a new connection is explained by
// routing's confirmation: its evidence plus the in-flight allowance; zero
// while routing is not confirmed.
func (d *Drain) explainedBy() time.Time {
	if d.evidence.IsZero() {
		return time.Time{}
	}
	return d.evidence.Add(d.s.InFlightAllowance)
}

// SetPodCheck feeds the condition of the balancers that check the pod
// itself, from the stop on; it counts from the next SetRouting.
func (d *Drain) SetPodCheck(c PodCheck) { d.podCheck = &c }

// Routing is the routing condition the drain decides on: the latest
// SetRouting's, with the pod's own check.
func (d *Drain) Routing() Routing { return d.routing }

// Tick advances the clock and returns the action to take now, at most once
// each: SoftStop when Draining ends (conditions met or bound reached),
// HardStop when Stopping reaches the deadline. Other phases return None.
func (d *Drain) Tick(now time.Time) Action {
	switch d.phase {
	case Draining:
		if d.q.met(now, d.withdrawn(), d.explainedBy()) && routingMet(d.routing) {
			reason, detail := routingReason(d.routing), d.routing.Detail()
			if reason == ReasonLBMarkedDown {
				// The balancer's window is a setting: what the pod saw
				// after it is the evidence, so the result names it.
				detail += "; " + d.q.detail(now, true, time.Time{})
			}
			if d.a.late > 0 {
				// A path the verdict did not see sent here: the result
				// cannot claim the withdrawal.
				if reason != ReasonQuiet {
					reason = ReasonUnverified
				}
				detail = d.a.detail() + "; " + detail
			}
			d.stop(now, reason, detail)
			return SoftStop
		}
		if !now.Before(d.boundAt) {
			reason := ReasonBound
			if !d.q.answering(now) {
				reason = ReasonUnavailable
			}
			detail := d.pending(now)
			if d.a.late > 0 {
				detail += "; " + d.a.detail()
			}
			d.stop(now, reason, detail)
			return SoftStop
		}
	case Stopping:
		if d.hardStopAt.IsZero() && !now.Before(d.deadline) {
			d.hardStopAt = now
			return HardStop
		}
	}
	return None
}

// stop ends the draining phase.
func (d *Drain) stop(now time.Time, r Reason, detail string) {
	d.phase, d.softStopAt, d.reason, d.detail = Stopping, now, r, detail
}

// pending lists the conditions that do not hold at now, for a bound result.
// Unverified routing does not hold a drain, but a bound drain names it too:
// the detail must not read as if routing had been observed withdrawn.
func (d *Drain) pending(now time.Time) string {
	var p []string
	if !routingMet(d.routing) || d.routing.State == RoutingUnverified {
		p = append(p, "routing: "+d.routing.Stated())
	}
	if !d.q.met(now, d.withdrawn(), d.explainedBy()) || !d.q.readable(now) {
		p = append(p, "quiet: "+d.q.detail(now, d.withdrawn(), d.explainedBy()))
	}
	return strings.Join(p, "; ")
}

// withdrawn reports whether the quiet rule of withdrawn routing applies.
func (d *Drain) withdrawn() bool { return d.routing.State == RoutingWithdrawn }

// MasterExited records that the master process is gone, in any phase.
func (d *Drain) MasterExited(now time.Time) {
	if d.phase == Exited {
		return
	}
	if d.phase != Stopping {
		d.detail = fmt.Sprintf("master exited while %s", d.phase)
	}
	d.phase, d.exitedAt = Exited, now
}
