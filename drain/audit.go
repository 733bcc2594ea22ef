package drain

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// audit accounts for every new connection HAProxy counts once routing was
// observed withdrawn. Connections already on their way when the last path
// changed show in the readings of the in-flight window that follows the
// verdict (Settings.InFlightWindow); one counted later came through a path
// the verdict did not see (an unobserved proxy, a mesh sidecar reading
// EndpointSlices itself, a node whose sync was misjudged, a load balancer
// slower than its window). Where routing is confirmed (Routing.Confirmed),
// the confirmation dates itself: a connection counted after its evidence
// plus the in-flight allowance is late, even in a reading taken before the
// verdict came (the drain's readings not counted late are kept, bounded,
// and judged again at each verdict). Such late arrivals do not change when
// the drain may end (they move the quiet clock like any connection), but
// its result can no longer claim the withdrawal: it is unverified, and
// says so.
type audit struct {
	window   time.Duration
	allow    time.Duration             // Settings.InFlightAllowance: after the confirmation's evidence
	accepted map[int]map[string]uint64 // Worker.Accepted per PID at the last successful reading
	byFront  map[string]int            // late arrivals per frontend
	since    time.Time                 // start of the current withdrawn spell; zero while not withdrawn
	from     time.Time                 // what late arrivals are counted after: the verdict, or the confirmation's evidence
	by       time.Time                 // readings after it are late: from + window (or + allow); zero while not withdrawn
	late     int                       // new connections counted after by, over the drain
	last     time.Time                 // the reading that counted the latest late arrival
	maxGap   time.Duration             // the longest a late arrival was counted after from
	dated    bool                      // the latest late arrival was judged against the confirmation's evidence
	unjudged []arrival                 // readings of the drain with new connections not counted late, newest last
	poll     time.Duration             // Settings.PollInterval; 0: readings are taken as on time
	prev     time.Time                 // the last successful reading
}

// arrival is one reading's new connections per frontend, counted by the
// reading at at. due is when a reading on schedule would have counted
// them at the latest: a poll interval after the successful reading
// before, where that comes before at. The window and the allowance
// assume readings on schedule; a reading delayed past them (a loaded
// machine, a slow master CLI) counts connections that may have come in
// time, and they are late only when due is after by.
type arrival struct {
	at, due time.Time
	added   map[string]uint64
}

// maxUnjudged bounds the readings kept for a later verdict to judge: 6.4 s
// of readings that all showed new connections at the default poll interval.
// The oldest are dropped first; they are the least likely to be late.
const maxUnjudged = 64

// routing follows the routing state: a withdrawn spell starts at the
// first withdrawn verdict and ends at any other state. explainedBy is the
// confirmation's evidence plus the in-flight allowance (zero when routing
// is not confirmed): readings after it are late even if they came before
// the verdict, so the readings of the drain not yet counted are judged
// again.
func (a *audit) routing(r Routing, now, evidence time.Time) (late int) {
	switch {
	case r.State != RoutingWithdrawn:
		a.since, a.by = time.Time{}, time.Time{}
		return 0
	case a.since.IsZero():
		a.since = now
	}
	a.from, a.by, a.dated = a.since, a.since.Add(a.window), false
	if !evidence.IsZero() && evidence.Add(a.allow).Before(a.by) {
		a.from, a.by, a.dated = evidence, evidence.Add(a.allow), true
	}
	kept := a.unjudged[:0]
	for _, e := range a.unjudged {
		if e.due.After(a.by) {
			late += a.count(e)
		} else {
			kept = append(kept, e)
		}
	}
	a.unjudged = kept
	return late
}

// observe counts the new connections of a successful reading: a worker's
// Accepted that rose, or a worker first seen after the first reading with
// Accepted above zero (a reload's new worker starts at zero). Those counted
// in a reading taken after by, and due after it (arrival), are late. It
// returns how many this reading added.
func (a *audit) observe(o Observation, draining bool) int {
	if o.Err != nil {
		return 0
	}
	added := map[string]uint64{}
	next := make(map[int]map[string]uint64, len(o.Workers))
	for _, w := range o.Workers {
		prev, known := a.accepted[w.PID]
		for fe, n := range w.Accepted {
			switch {
			case known && n > prev[fe]:
				added[fe] += n - prev[fe]
			case !known && a.accepted != nil:
				added[fe] += n
			}
		}
		next[w.PID] = w.Accepted
	}
	a.accepted = next
	due := o.At
	if !a.prev.IsZero() && a.poll > 0 && a.prev.Add(a.poll).Before(due) {
		due = a.prev.Add(a.poll)
	}
	a.prev = o.At
	total := 0
	for _, n := range added {
		total += int(n)
	}
	if !draining || total == 0 {
		return 0
	}
	e := arrival{at: o.At, due: due, added: added}
	if a.by.IsZero() || !due.After(a.by) {
		if len(a.unjudged) == maxUnjudged {
			a.unjudged = a.unjudged[1:]
		}
		a.unjudged = append(a.unjudged, e)
		return 0
	}
	return a.count(e)
}

// count takes one reading's new connections as late arrivals.
func (a *audit) count(e arrival) int {
	if a.byFront == nil {
		a.byFront = map[string]int{}
	}
	total := 0
	for fe, n := range e.added {
		if n > 0 {
			a.byFront[fe] += int(n)
			total += int(n)
		}
	}
	a.late += total
	if e.at.After(a.last) {
		a.last = e.at
	}
	a.maxGap = max(a.maxGap, e.at.Sub(a.from))
	return total
}

// detail says what the late arrivals were, for the drain's result.
func (a *audit) detail() string {
	var fronts []string
	for _, fe := range slices.Sorted(maps.Keys(a.byFront)) {
		fronts = append(fronts, fmt.Sprintf("%s %d", fe, a.byFront[fe]))
	}
	after := fmt.Sprintf("after routing was observed withdrawn (in-flight window %v", a.window)
	if a.dated {
		after = fmt.Sprintf("after the last node's confirming sync (in-flight allowance %v", a.allow)
	}
	return fmt.Sprintf("%d new connections arrived up to %.1fs %s; frontend %s): a path hapsuper does not observe still sends here",
		a.late, a.maxGap.Seconds(), after, strings.Join(fronts, ", "))
}
