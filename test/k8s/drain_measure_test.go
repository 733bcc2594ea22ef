package k8s_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hapsuper/hapsuper/test/harness"
	"github.com/hapsuper/hapsuper/test/k8s/k8stest"
)

// measureRounds is how many drains TestDrain_Measure runs: 30 by default
// (about two minutes), or HAPSUPER_K8S_MEASURE rounds when that is a number
// above 1 (HAPSUPER_K8S_MEASURE=1 means 60).
func measureRounds() int {
	v := os.Getenv("HAPSUPER_K8S_MEASURE")
	if n, err := strconv.Atoi(v); err == nil && n > 1 {
		return n
	}
	if v != "" {
		return 60
	}
	return 30
}

// measured is one round of TestDrain_Measure.
type measured struct {
	drainRecord
	rolling  bool
	late     int           // requests sent after the withdrawn line that reached the pod
	lastHit  time.Duration // withdrawn line − send time of the last request the pod answered
	hitAfter time.Duration // send time of the last request the pod answered − delete
}

// staleHit is how long after the delete a request must still reach the
// old pod for the round to count as having met a kube-proxy sync that
// completed without the deletion (plain withdrawals take ~10–40 ms).
const staleHit = 300 * time.Millisecond

// The confirmation rule measured on live kube-proxies (nftables,
// minSyncPeriod 1 s), one cluster, pods coming and going: half the rounds
// are plain deletes (the replacement Ready and synced long before), half
// rolling-update timing (the replacement turns Ready, the old pod is
// deleted 0–30 ms later, so kube-proxy's sync for the replacement is
// running when the deletion arrives and completes without it). A stable
// pod on node2 keeps a ready endpoint besides the replacement. Clients on
// both nodes open a connection every 20 ms throughout.
//
// Must hold in every round: no request sent after hapsuper logged routing
// withdrawn reaches the old pod (no node DNATs a new connection to it after
// the confirmation), no request fails, hapsuper exits 0 within the grace
// period. Reported: routed-away vs bound, and the distributions of
// (withdrawn − delete) and (drain ended − delete).
func TestDrain_Measure(t *testing.T) { measure(t, measureRounds(), false) }

// restartRounds is how many drains TestDrain_MeasureRestart runs: 10 by
// default, or HAPSUPER_K8S_MEASURE_RESTART rounds.
func restartRounds() int {
	if n, err := strconv.Atoi(os.Getenv("HAPSUPER_K8S_MEASURE_RESTART")); err == nil && n > 0 {
		return n
	}
	return 10
}

// TestDrain_Measure with node2's kube-proxy stopped at each delete and
// started 3 s later, its first sync slowed by 1 s (so that its start stamp
// is seen before the sync): no request sent after routing withdrawn may
// reach the old pod.
func TestDrain_MeasureRestart(t *testing.T) { measure(t, restartRounds(), true) }

// measure runs the rounds; restart stops node2's kube-proxy at each delete
// and starts it 3 s later.
func measure(t *testing.T, rounds int, restart bool) {
	began := time.Now()
	e := newDrainEnv(t, k8stest.Options{Nodes: 2})
	url := e.service(t, "web", false)
	e.startPlainPod(t, 2, "stable", "web")
	cur := e.startPod(t, 1, "m-0", "web")
	cur.ready(t)
	e.waitRouted(t, url, map[int][]string{1: {"stable", "m-0"}, 2: {"stable", "m-0"}})
	tr := startTraffic(t, url, e.H.Nodes(), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()

	var slow slowFirstSync
	if restart {
		slow = newSlowFirstSync(t, time.Second)
	}
	var results []measured
	lastChange := time.Now()
	for i := 1; i <= rounds; i++ {
		rolling := i%2 == 0
		next := e.startPod(t, i%2+1, "m-"+strconv.Itoa(i), "web")
		if rolling {
			// kube-proxy idle for more than minSyncPeriod: the Ready change
			// starts a sync at once, and the deletion arrives during it.
			time.Sleep(time.Until(lastChange.Add(1200 * time.Millisecond)))
			if err := e.H.SetPodReady(ctx, next.Pod, true); err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Duration(rand.IntN(31)) * time.Millisecond)
		} else {
			next.ready(t)
			e.waitRouted(t, url, map[int][]string{1: {next.Name}, 2: {next.Name}})
			time.Sleep(1200 * time.Millisecond)
		}
		if restart {
			if err := e.H.KubeProxy(2).Stop(); err != nil {
				t.Fatal(err)
			}
		}
		cur.terminate(t)
		if restart {
			time.Sleep(time.Until(cur.deletedAt.Add(3 * time.Second)))
			slow.start(t, e.H.KubeProxy(2))
		}
		r := cur.ended(t, true)
		lastChange = time.Now()
		results = append(results, measured{drainRecord: r, rolling: rolling})
		cur = next
	}
	time.Sleep(300 * time.Millisecond)
	tr.Stop()

	var failed, bound int
	for i := range results {
		m := &results[i]
		hits := tr.Where(func(o harness.Outcome) bool { return o.Pod == m.pod })
		if len(hits) > 0 {
			m.hitAfter = hits[len(hits)-1].Sent.Sub(m.deleted)
		}
		if !m.Withdrawn.IsZero() {
			late := tr.answeredBy(m.pod, m.Withdrawn)
			if m.late = len(late); m.late > 0 {
				failed++
				t.Errorf("%s: %d requests sent after its routing withdrawn log line reached it:%s", m.pod, len(late), harness.Describe(late, 5))
			}
			if len(hits) > 0 {
				m.lastHit = m.Withdrawn.Sub(hits[len(hits)-1].Sent)
			}
		}
		if m.Reason != "routed-away" {
			bound++
		}
	}
	t.Logf("clients: %s", tr.summary())
	checkNoFailures(t, tr, time.Time{})
	// Liveness, not safety: a lagging watcher may send a drain to the
	// bound now and then (DESIGN, known weak spots); most must not.
	if bound > len(results)/5 && !restart {
		t.Errorf("%d of %d drains did not end routed-away with every kube-proxy live", bound, len(results))
	}
	t.Logf("%d drains in %v; rounds with a new connection DNATed to the pod after withdrawn: %d\n%s",
		len(results), time.Since(began).Round(time.Second), failed, measureTable(results))
}

// measureTable prints each round and the distributions per kind.
func measureTable(results []measured) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-6s %-8s %-12s %10s %10s %9s %8s %5s %s\n", "pod", "kind", "reason", "withdrawn", "ended", "hitAfter", "lastHit", "late", "detail")
	for _, m := range results {
		w := "-"
		if !m.Withdrawn.IsZero() {
			w = ms(m.Withdrawn.Sub(m.deleted))
		}
		detail := m.Detail
		if len(detail) > 90 {
			detail = detail[:90] + "…"
		}
		fmt.Fprintf(&b, "%-6s %-8s %-12s %10s %10s %9s %8s %5d %s\n", m.pod, kindName(m.rolling), m.Reason, w,
			ms(m.Ended.Sub(m.deleted)), ms(m.hitAfter), ms(m.lastHit), m.late, detail)
	}
	b.WriteString("\n(ms after the delete; hitAfter: last request the pod answered, sent at; lastHit: withdrawn line − that send time)\n")
	for _, rolling := range []bool{false, true} {
		reasons := map[string]int{}
		var withdrawn, ended []time.Duration
		late, stale := 0, 0
		for _, m := range results {
			if m.rolling != rolling {
				continue
			}
			if m.hitAfter > staleHit {
				stale++
			}
			reasons[m.Reason]++
			if !m.Withdrawn.IsZero() {
				withdrawn = append(withdrawn, m.Withdrawn.Sub(m.deleted))
			}
			ended = append(ended, m.Ended.Sub(m.deleted))
			if m.late > 0 {
				late++
			}
		}
		fmt.Fprintf(&b, "%-8s reasons %v; late DNAT (after withdrawn) in %d rounds; pod still reached >%v after the delete in %d rounds\n",
			kindName(rolling), reasons, late, staleHit, stale)
		fmt.Fprintf(&b, "         withdrawn − delete %s\n", dist(withdrawn))
		fmt.Fprintf(&b, "         ended − delete     %s\n", dist(ended))
	}
	return b.String()
}

func kindName(rolling bool) string {
	if rolling {
		return "rolling"
	}
	return "plain"
}

// dist is min / median / p90 / max of ds.
func dist(ds []time.Duration) string {
	if len(ds) == 0 {
		return "(none)"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	q := func(p float64) time.Duration { return s[int(p*float64(len(s)-1)+0.5)] }
	return fmt.Sprintf("n=%d min %s, median %s, p90 %s, max %s (ms)", len(s), ms(s[0]), ms(q(0.5)), ms(q(0.9)), ms(s[len(s)-1]))
}

func ms(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }
