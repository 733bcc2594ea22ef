package status

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/hapsuper/hapsuper/drain"
)

// The JSON of a snapshot is what `hapsuper status --json` prints and what
// scripts parse: every field name and value format is pinned here, for a
// snapshot with every field set and for the zero snapshot.
func TestSnapshotJSONShape(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	sec := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	code := 137
	full := Snapshot{
		Phase:      drain.Stopping,
		MasterPID:  10,
		ObservedAt: sec(3),
		PollError:  "read show proc: i/o timeout",
		Drain: Drain{
			Phase: drain.Stopping, StopRequested: t0, Bound: sec(18), Deadline: sec(28),
			SoftStop: sec(2.5), HardStop: sec(28), Exited: sec(29),
			Reason: drain.ReasonUnverified, Detail: "node-b: kube-proxy healthz refused",
			Conditions: []Condition{
				{Name: drain.ConditionQuiet, Met: true, Since: sec(0.5)},
				{Name: drain.ConditionRouting, Met: false, Detail: "pending (default/web)", PendingNodes: 2},
			},
		},
		Workers: []Worker{{PID: 11, Old: false, Sessions: 3, Requests: 99, Connections: 40}, {PID: 9, Old: true, Sessions: 1}},
		Reloads: Reloads{OK: 2, Refused: 1, Failed: 1, Last: &Reload{At: sec(1), Result: ReloadFailed, Origin: "master CLI", Ended: sec(1.5),
			Detail: "HAProxy did not load the new configuration"}},
		Settings:  Settings{GracePeriod: Duration(30 * time.Second), QuietPeriod: Duration(2 * time.Second), WithdrawnQuietPeriod: Duration(time.Second), MaxWait: Duration(18 * time.Second), Margin: Duration(2 * time.Second), PollInterval: Duration(100 * time.Millisecond), Routing: "kube-proxy"},
		Companion: &Companion{Path: "/ctl", State: "backoff", Restarts: 2, LastExit: &code, LastExitAt: sec(4), NextStart: sec(4.5)},
		Error:     "bad request",
	}
	for _, tc := range []struct {
		name string
		snap Snapshot
		want string
	}{
		{"every field", full, `{"phase":"stopping","masterPid":10,"observedAt":"2026-11-30T12:00:03Z","pollError":"read show proc: i/o timeout",` +
			`"drain":{"phase":"stopping","stopRequested":"2026-11-30T12:00:00Z","bound":"2026-11-30T12:00:18Z","deadline":"2026-11-30T12:00:28Z",` +
			`"softStop":"2026-11-30T12:00:02.5Z","hardStop":"2026-11-30T12:00:28Z","exited":"2026-11-30T12:00:29Z",` +
			`"reason":"unverified","detail":"node-b: kube-proxy healthz refused",` +
			`"conditions":[{"name":"quiet","met":true,"since":"2026-11-30T12:00:00.5Z"},{"name":"routing","met":false,"detail":"pending (default/web)","pendingNodes":2}]},` +
			`"workers":[{"pid":11,"old":false,"sessions":3,"connsPlusRequests":99,"connections":40},{"pid":9,"old":true,"sessions":1,"connsPlusRequests":0,"connections":0}],` +
			`"reloads":{"ok":2,"refused":1,"failed":1,"last":{"at":"2026-11-30T12:00:01Z","result":"failed","origin":"master CLI","ended":"2026-11-30T12:00:01.5Z","detail":"HAProxy did not load the new configuration"}},` +
			`"settings":{"gracePeriod":"30s","quietPeriod":"2s","withdrawnQuietPeriod":"1s","maxWait":"18s","margin":"2s","pollInterval":"100ms","routing":"kube-proxy"},` +
			`"companion":{"path":"/ctl","state":"backoff","restarts":2,"lastExit":137,"lastExitAt":"2026-11-30T12:00:04Z","nextStart":"2026-11-30T12:00:04.5Z"},` +
			`"error":"bad request"}`},
		{"zero", Snapshot{}, `{"phase":"","masterPid":0,"drain":{"phase":""},"workers":null,"reloads":{"ok":0,"refused":0,"failed":0},` +
			`"settings":{"gracePeriod":"0s","quietPeriod":"0s","withdrawnQuietPeriod":"0s","maxWait":"0s","margin":"0s","pollInterval":"0s","routing":""}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := json.Marshal(tc.snap)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("JSON:\n got %s\nwant %s", got, tc.want)
			}
			var back Snapshot
			if err := json.Unmarshal(got, &back); err != nil {
				t.Fatalf("decode: %v", err)
			}
			again, _ := json.Marshal(back)
			if !bytes.Equal(again, got) {
				t.Errorf("decode and encode again:\n got %s\nwant %s", again, got)
			}
		})
	}
}

// conditions is routing conditions that say a fixed text.
type conditions string

func (c conditions) Text() string { return string(c) }

// The supervisor publishes the routing condition typed; its detail is
// rendered where it is shown: the JSON's detail (the same string field a
// client reads back) and the text.
func TestRoutingDetailRenderedWhereShown(t *testing.T) {
	r := drain.Routing{State: drain.RoutingPending, Why: conditions("routed here in the API: default/web"),
		PodCheck: &drain.PodCheck{Bind: ":8404", Threshold: 2}}
	want := "pending (routed here in the API: default/web; load balancers checking the pod at :8404: the check not failed yet)"
	stop := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	snap := Snapshot{Phase: drain.Draining, Drain: Drain{Phase: drain.Draining, StopRequested: stop,
		Conditions: []Condition{{Name: drain.ConditionRouting, Routing: &r}}}}
	got, err := json.Marshal(snap)
	if err != nil {
		t.Fatal(err)
	}
	var back Snapshot
	if err := json.Unmarshal(got, &back); err != nil {
		t.Fatalf("decode: %v", err)
	}
	if c := back.Drain.Conditions[0]; c.Detail != want || c.Text() != want {
		t.Errorf("detail read back from %s:\n got %q\nwant %q", got, c.Detail, want)
	}
	for name, s := range map[string]Snapshot{"server": snap, "client": back} {
		var b bytes.Buffer
		if err := Render(&b, s, stop.Add(time.Second)); err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(b.Bytes(), []byte("pending ("+want+")")) {
			t.Errorf("%s text does not show %q:\n%s", name, want, b.String())
		}
	}
}
