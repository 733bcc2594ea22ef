package metrics

import (
	"testing"
	"time"

	"github.com/hapsuper/hapsuper/status"
)

// The companion's families follow the snapshot: absent without a
// companion, its state, restarts and last exit with one.
func TestCollectorCompanion(t *testing.T) {
	if mfs := families(t, collector{board: status.NewBoard(status.Snapshot{}), now: time.Now}); mfs["hapsuper_companion_state"] != nil {
		t.Error("companion families without --companion")
	}
	code := 137
	board := status.NewBoard(status.Snapshot{Companion: &status.Companion{State: "backoff", Restarts: 3, LastExit: &code}})
	mfs := families(t, collector{board: board, now: time.Now})
	states := map[string]float64{}
	for _, m := range mfs["hapsuper_companion_state"].GetMetric() {
		states[m.GetLabel()[0].GetValue()] = m.GetGauge().GetValue()
	}
	if len(states) != len(status.CompanionStates()) || states["backoff"] != 1 || states["running"] != 0 {
		t.Errorf("companion states %v, want every state, backoff 1", states)
	}
	if got := mfs["hapsuper_companion_restarts_total"].GetMetric()[0].GetCounter().GetValue(); got != 3 {
		t.Errorf("restarts %v, want 3", got)
	}
	if got := mfs["hapsuper_companion_last_exit_code"].GetMetric()[0].GetGauge().GetValue(); got != 137 {
		t.Errorf("last exit code %v, want 137", got)
	}
}
