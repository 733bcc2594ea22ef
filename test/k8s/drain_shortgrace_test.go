package k8s_test

import (
	"context"
	"testing"
	"time"

	"github.com/hapsuper/hapsuper/test/k8s/k8stest"
)

// Pod web-a (hapsuper --grace-period 12s) deleted with a shorter grace
// period, as `kubectl delete --grace-period` or an eviction does, under
// clients opening a connection every 20 ms from both nodes. hapsuper takes
// the pod's grace period and gives the drain two thirds of grace − margin,
// so a drain that ends at the bound ends no earlier than that:
//   - 5 s: 2 s for the drain; no request fails, and the drain ends
//     routed-away as a rule. kube-proxy's confirmation can need 1.25 s past
//     a sync that came late (an EndpointSlice update retried by the
//     controller): such a drain ends bound at 2 s, and is logged;
//   - 3 s: 1 s of budget, 0.67 s for the drain;
//   - 2 s (= the margin): no budget; soft stop and hard stop at once.
//
// In every case hapsuper exits 0 before the kubelet's SIGKILL (the
// delete's grace period after SIGTERM).
func TestDrain_ShortDeletionGrace(t *testing.T) {
	for _, tc := range []struct {
		name  string
		grace time.Duration
		check func(t *testing.T, tr *traffic, a *hapPod, r drainRecord)
	}{
		{"5s", 5 * time.Second, func(t *testing.T, tr *traffic, _ *hapPod, r drainRecord) {
			checkNoFailures(t, tr, time.Time{})
			if r.Reason == "bound" {
				t.Logf("%s: kube-proxy's confirmation did not fit the drain's share: %s", r.pod, r.Detail)
			} else {
				checkReason(t, r, "routed-away")
			}
		}},
		{"3s", 3 * time.Second, nil},
		{"2s", 2 * time.Second, func(t *testing.T, _ *traffic, a *hapPod, r drainRecord) {
			if _, ok := a.Find("hard stop", nil); !ok {
				t.Errorf("%s: no hard stop with no stop budget left", r.pod)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, url, a, _ := twoPods(t, k8stest.Options{Nodes: 2})
			tr := startTraffic(t, url, e.H.Nodes(), nil)
			deleteWithGrace(t, a, tc.grace)
			a.sigterm(t)
			r := a.afterStop(t, tr, true)
			took, share := drainDuration(t, a), drainShare(tc.grace)
			t.Logf("grace %v: %d requests, %d failed (%d sent before hapsuper exited); stop to soft stop %v (drain's share %v), %s; exit %v after SIGTERM, code %d",
				tc.grace, len(tr.Outcomes()), len(tr.failedBefore(time.Time{})), len(tr.failedBefore(r.exit)),
				took, share, r.Reason, r.exit.Sub(r.term).Round(time.Millisecond), r.code)
			_, movedBefore := a.Find("the pod's grace period is shorter: the deadline will count from it", nil)
			_, movedAfter := a.Find("deadline moved to the pod's grace period", nil)
			if !movedBefore && !movedAfter {
				t.Errorf("%s: hapsuper never took the delete's grace period of %v", r.pod, tc.grace)
			}
			if r.Reason == "bound" && took < share {
				t.Errorf("%s: drain ended bound %v after the stop signal, before the drain's share %v of grace %v − margin", r.pod, took, share, tc.grace)
			}
			if d := r.exit.Sub(r.term); d >= tc.grace {
				t.Errorf("%s: hapsuper exited %v after SIGTERM, not before the kubelet's SIGKILL at %v", r.pod, d, tc.grace)
			}
			if tc.check != nil {
				tc.check(t, tr, a, r)
			}
		})
	}
}

// drainDuration is the drain's own measure of stop request to soft stop, on
// hapsuper's monotonic clock ("drain ended" duration_s, to the millisecond).
func drainDuration(t *testing.T, p *hapPod) time.Duration {
	t.Helper()
	l, ok := p.Find("drain ended", nil)
	s, okNum := l.Num("duration_s")
	if !ok || !okNum {
		t.Fatalf("%s: no duration_s in \"drain ended\": %s", p.Name, l.Raw)
	}
	return time.Duration(s * float64(time.Second)).Round(time.Millisecond)
}

// drainShare is the least the drain may last for a pod deleted with grace:
// hapsuper's default max wait (two thirds of drainGrace − margin, to the
// millisecond) scaled by what is left of the budget, in whole milliseconds
// (the log rounds duration_s to the millisecond).
func drainShare(grace time.Duration) time.Duration {
	const margin = 2 * time.Second
	if grace <= margin {
		return 0
	}
	millis := func(d time.Duration) int64 { return int64(d / time.Millisecond) }
	return time.Duration(millis(drainBound)*millis(grace-margin)/millis(drainGrace-margin)) * time.Millisecond
}

// deleteWithGrace deletes p's Pod object with grace, as `kubectl delete
// --grace-period` does; the kubelet's SIGTERM is the caller's.
func deleteWithGrace(t *testing.T, p *hapPod, grace time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.e.H.DeletePod(ctx, p.Pod, grace); err != nil {
		t.Fatal(err)
	}
	p.deletedAt = time.Now()
}
