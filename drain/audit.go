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
// slower than its window). Such late arrivals do not change when the drain
// may end (they move the quiet clock like any connection), but its result
// can no longer claim the withdrawal: it is unverified, and says so.
type audit struct {
	window   time.Duration
	accepted map[int]map[string]uint64 // Worker.Accepted per PID at the last successful reading
	byFront  map[string]int            // late arrivals per frontend
	since    time.Time                 // start of the current withdrawn spell; zero while not withdrawn
	late     int                       // new connections counted after since+window, over the drain
	last     time.Time                 // the reading that counted the latest late arrival
	maxGap   time.Duration             // the longest a late arrival was counted after its verdict
}

// routing follows the routing state: a withdrawn spell starts at the
// first withdrawn verdict and ends at any other state.
func (a *audit) routing(r Routing, now time.Time) {
	switch {
	case r.State != RoutingWithdrawn:
		a.since = time.Time{}
	case a.since.IsZero():
		a.since = now
	}
}

// observe counts the new connections of a successful reading: a worker's
// Accepted that rose, or a worker first seen after the first reading with
// Accepted above zero (a reload's new worker starts at zero). Those counted
// in a reading taken after the in-flight window of a withdrawn verdict are
// late. It returns how many this reading added.
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
	total := 0
	for _, n := range added {
		total += int(n)
	}
	if !draining || a.since.IsZero() || total == 0 || !o.At.After(a.since.Add(a.window)) {
		return 0
	}
	if a.byFront == nil {
		a.byFront = map[string]int{}
	}
	for fe, n := range added {
		if n > 0 {
			a.byFront[fe] += int(n)
		}
	}
	a.late += total
	a.last, a.maxGap = o.At, max(a.maxGap, o.At.Sub(a.since))
	return total
}

// detail says what the late arrivals were, for the drain's result.
func (a *audit) detail() string {
	var fronts []string
	for _, fe := range slices.Sorted(maps.Keys(a.byFront)) {
		fronts = append(fronts, fmt.Sprintf("%s %d", fe, a.byFront[fe]))
	}
	return fmt.Sprintf("%d new connections arrived up to %.1fs after routing was observed withdrawn (in-flight window %v; frontend %s): a path hapsuper does not observe still sends here",
		a.late, a.maxGap.Seconds(), a.window, strings.Join(fronts, ", "))
}
