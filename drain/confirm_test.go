package drain

import (
	"strings"
	"testing"
	"time"
)

// confirmSettings: quiet 2 s, withdrawn quiet 500 ms, in-flight window
// 450 ms, in-flight allowance 200 ms (kube-proxy mode's defaults).
var confirmSettings = func() Settings {
	s := settings
	s.WithdrawnQuietPeriod = 500 * time.Millisecond
	s.InFlightWindow = 450 * time.Millisecond
	s.InFlightAllowance = 200 * time.Millisecond
	return s
}()

// confirmed is a withdrawn verdict that every node's kube-proxy confirmed,
// its last confirming sync done by syncedBy (negative: undated).
func (r *run) confirmed(off, syncedBy time.Duration) int {
	rt := Routing{State: RoutingWithdrawn, Confirmed: true, Why: note("confirmed")}
	if syncedBy >= 0 {
		rt.SyncedBy = at(syncedBy)
	}
	return r.d.SetRouting(rt, at(off))
}

// Clients open connections until the last node's rules drop the pod (1.0 s);
// the confirmation comes at 1.3 s, dated 1.05 s. Every connection counted
// by 1.25 s (the evidence + the allowance) is explained: the drain ends at
// the first reading from then on, not the withdrawn quiet period after the
// last connection.
func TestConfirmedEndsAtTheEvidence(t *testing.T) {
	r := serving(t, confirmSettings)
	r.route(0, RoutingPending, "kube-proxy not confirmed")
	r.poll(0, nc(100, 0))
	r.stop(0)
	for i, off := range []float64{0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1} {
		r.want(sec(off), r.poll(sec(off), nc(100, uint64(i+1))), None)
	}
	r.want(sec(1.2), r.poll(sec(1.2), nc(100, 12)), None) // counted by 1.25 s: explained
	r.confirmed(sec(1.3), sec(1.05))
	r.want(sec(1.3), r.poll(sec(1.3), nc(100, 12)), SoftStop)
	r.wantEnd(sec(1.3), ReasonRoutedAway, "confirmed")
	if st := r.d.Status(at(sec(1.3))); st.LateConnections != 0 {
		t.Errorf("LateConnections %d, want 0", st.LateConnections)
	}
}

// A confirmation that comes early still waits for its evidence plus the
// allowance to pass, proved by a reading then.
func TestConfirmedWaitsForTheAllowance(t *testing.T) {
	r := serving(t, confirmSettings)
	r.poll(0, nc(100, 5))
	r.stop(0)
	r.confirmed(sec(0.1), sec(0.1))
	r.want(sec(0.2), r.poll(sec(0.2), nc(100, 6)), None)
	if d := r.d.Status(at(sec(0.2))).Conditions[0].Detail; !strings.Contains(d, "explained by kube-proxy's confirmation") || !strings.Contains(d, "end in 0.1s") {
		t.Fatalf("quiet detail %q, want the confirmation's end", d)
	}
	r.want(sec(0.3), r.d.Tick(at(sec(0.3))), None) // no reading since 0.2 s: not proved
	r.want(sec(0.31), r.poll(sec(0.31), nc(100, 6)), SoftStop)
	r.wantEnd(sec(0.31), ReasonRoutedAway, "confirmed")
}

// A new connection counted after the evidence plus the allowance is
// unexplained: it is late, and the soft stop waits the full withdrawn quiet
// period after it.
func TestConfirmedUnexplainedConnectionWaitsTheWindow(t *testing.T) {
	r := serving(t, confirmSettings)
	r.poll(0, nc(100, 5))
	r.stop(0)
	r.confirmed(sec(0.5), sec(0.4))
	r.want(sec(0.5), r.poll(sec(0.5), nc(100, 6)), None) // by 0.6 s: explained
	r.want(sec(0.7), r.poll(sec(0.7), nc(100, 8)), None) // after 0.6 s: unexplained
	if d := r.d.Status(at(sec(0.8))).Conditions[0].Detail; d != "unexplained by kube-proxy's confirmation: last new connection 0.1s ago" {
		t.Fatalf("quiet detail %q", d)
	}
	r.pollIdle(sec(0.8), sec(1.1), sec(0.1), nc(100, 8))
	r.want(sec(1.2), r.poll(sec(1.2), nc(100, 8)), SoftStop)
	st := r.d.Status(at(sec(1.2)))
	want := "2 new connections arrived up to 0.3s after the last node's confirming sync (in-flight allowance 200ms; frontend web 2): a path hapsuper does not observe still sends here; confirmed"
	if st.Reason != ReasonUnverified || st.LateConnections != 2 || st.Detail != want {
		t.Fatalf("end %s, %d late, %q\nwant unverified, 2 late, %q", st.Reason, st.LateConnections, st.Detail, want)
	}
}

// A connection counted after the evidence plus the allowance but before the
// verdict came is unexplained too: the verdict judges the drain's earlier
// readings, and the quiet clock already moved at that reading.
func TestConfirmedJudgesReadingsBeforeTheVerdict(t *testing.T) {
	r := serving(t, confirmSettings)
	r.route(0, RoutingPending, "kube-proxy not confirmed")
	r.poll(0, nc(100, 5))
	r.stop(0)
	r.want(sec(0.4), r.poll(sec(0.4), nc(100, 6)), None)
	r.want(sec(0.9), r.poll(sec(0.9), nc(100, 9)), None)
	if n := r.confirmed(sec(1.0), sec(0.3)); n != 3 { // explains until 0.5 s
		t.Errorf("SetRouting found %d late arrivals, want 3", n)
	}
	if st := r.d.Status(at(sec(1.0))); st.LateConnections != 3 {
		t.Fatalf("LateConnections %d, want the 3 counted at 0.9 s", st.LateConnections)
	}
	r.want(sec(1.3), r.poll(sec(1.3), nc(100, 9)), None)
	r.want(sec(1.4), r.poll(sec(1.4), nc(100, 9)), SoftStop) // 0.9 s + 500 ms
	if st := r.d.Status(at(sec(1.4))); st.Reason != ReasonUnverified {
		t.Fatalf("reason %s, want unverified", st.Reason)
	}
}

// A confirmation that does not date its syncs (the metrics' pending gauge
// confirmed a node) is dated by the verdict itself; a later verdict dated
// later (a newer sync) does not move the evidence.
func TestConfirmedEvidenceNeverMovesLater(t *testing.T) {
	r := serving(t, confirmSettings)
	r.poll(0, nc(100, 5))
	r.stop(0)
	r.want(sec(0.9), r.poll(sec(0.9), nc(100, 7)), None)
	r.confirmed(sec(1.0), -1) // undated: 1.0 s, explains until 1.2 s
	r.want(sec(1.1), r.poll(sec(1.1), nc(100, 8)), None)
	r.confirmed(sec(1.15), sec(1.1))                       // a newer sync: 1.0 s stands
	r.want(sec(1.25), r.poll(sec(1.25), nc(100, 9)), None) // after 1.2 s: unexplained
	r.pollIdle(sec(1.35), sec(1.65), sec(0.1), nc(100, 9))
	r.want(sec(1.75), r.poll(sec(1.75), nc(100, 9)), SoftStop)
	if st := r.d.Status(at(sec(1.75))); st.Reason != ReasonUnverified || st.LateConnections != 1 {
		t.Fatalf("end %s with %d late, want unverified with 1", st.Reason, st.LateConnections)
	}
}

// Where nothing confirms (the API alone, a balancer), today's rule stays:
// the withdrawn quiet period after the last new connection.
func TestUnconfirmedKeepsTheWindow(t *testing.T) {
	for _, tc := range []struct {
		name   string
		r      Routing
		reason Reason
	}{
		{"withdrawn-in-api", Routing{State: RoutingWithdrawn, APIOnly: true, Confirmed: true, SyncedBy: at(sec(1.05))}, ReasonWithdrawnInAPI},
		{"lb-marked-down", Routing{State: RoutingWithdrawn, Balancer: true, Confirmed: true, SyncedBy: at(sec(1.05))}, ReasonLBMarkedDown},
		{"routed-away, not confirmed", Routing{State: RoutingWithdrawn}, ReasonRoutedAway},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := serving(t, confirmSettings)
			r.poll(0, nc(100, 0))
			r.stop(0)
			r.want(sec(1.2), r.poll(sec(1.2), nc(100, 12)), None)
			r.d.SetRouting(tc.r, at(sec(1.3)))
			r.pollIdle(sec(1.3), sec(1.6), sec(0.1), nc(100, 12))
			r.want(sec(1.7), r.poll(sec(1.7), nc(100, 12)), SoftStop) // 1.2 s + 500 ms
			if st := r.d.Status(at(sec(1.7))); st.Reason != tc.reason {
				t.Fatalf("reason %s, want %s", st.Reason, tc.reason)
			}
		})
	}
}

// With readings every 100 ms (Settings.PollInterval), one delayed to 0.9 s
// (a loaded machine: the reading before came at 0.5 s) counts connections
// an on-time reading would have counted by 0.6 s, the evidence (0.4 s)
// plus the allowance: they may have come in time and are not late. The
// next reading, on time, counts one that came after: late, and the drain
// ends unverified. Without the delay, the same connection is late at the
// reading that counts it.
func TestConfirmedDelayedReadingIsJudgedAsOfItsTurn(t *testing.T) {
	s := confirmSettings
	s.PollInterval = 100 * time.Millisecond
	r := serving(t, s)
	r.poll(0, nc(100, 5))
	r.stop(0)
	r.want(sec(0.5), r.poll(sec(0.5), nc(100, 6)), None)
	r.confirmed(sec(0.5), sec(0.4)) // explains until 0.6 s
	r.want(sec(0.9), r.poll(sec(0.9), nc(100, 9)), None)
	if st := r.d.Status(at(sec(0.9))); st.LateConnections != 0 {
		t.Fatalf("LateConnections %d after the delayed reading, want 0: due at 0.6 s", st.LateConnections)
	}
	r.want(sec(1.0), r.poll(sec(1.0), nc(100, 10)), None)
	if st := r.d.Status(at(sec(1.0))); st.LateConnections != 1 {
		t.Fatalf("LateConnections %d, want the 1 counted on time at 1.0 s", st.LateConnections)
	}
	r.pollIdle(sec(1.1), sec(1.4), sec(0.1), nc(100, 10))
	r.want(sec(1.5), r.poll(sec(1.5), nc(100, 10)), SoftStop) // quiet 500 ms after 1.0 s
	if st := r.d.Status(at(sec(1.5))); st.Reason != ReasonUnverified || st.LateConnections != 1 {
		t.Fatalf("end %s with %d late, want unverified with 1", st.Reason, st.LateConnections)
	}
}
