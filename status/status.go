// Package status is hapsuper's status socket: the supervisor publishes a
// Snapshot, the server hands it to whoever asks over a unix socket, and
// `hapsuper status` reads and prints it.
//
// The protocol is one request line per connection: "status" (or an empty
// line). The reply is one JSON document and the server closes the
// connection. Any other request gets {"error": "..."}. The socket is mode
// 0600: only the supervisor's user (root in the image) may read it.
//
// The package must not decide anything: it shows what drain/ and the
// supervisor published, nothing more.
package status

import (
	"encoding/json"
	"sync"
	"time"

	"github.com/hapsuper/hapsuper/drain"
)

// Snapshot is the state of the supervisor at one instant. Its JSON form is
// the stable interface of `hapsuper status --json` (docs/status.md), pinned
// by TestSnapshotJSONShape: its types are this package's own, so drain/ can
// change without breaking a user's script.
type Snapshot struct {
	Phase      drain.Phase `json:"phase"`
	MasterPID  int         `json:"masterPid"`
	ObservedAt time.Time   `json:"observedAt,omitzero"` // last successful poll of the master CLI
	PollError  string      `json:"pollError,omitempty"` // last poll's error, if it failed
	Drain      Drain       `json:"drain"`
	Workers    []Worker    `json:"workers"`
	Reloads    Reloads     `json:"reloads"`
	Settings   Settings    `json:"settings"`
	Companion  *Companion  `json:"companion,omitempty"` // nil without --companion
	Error      string      `json:"error,omitempty"`     // set only in error replies
}

// Drain is where the drain stands. Times are zero (and left out of the
// JSON) until they happen.
type Drain struct {
	Phase         drain.Phase  `json:"phase"`
	StopRequested time.Time    `json:"stopRequested,omitzero"`
	Bound         time.Time    `json:"bound,omitzero"`    // end of max wait
	Deadline      time.Time    `json:"deadline,omitzero"` // hard stop
	SoftStop      time.Time    `json:"softStop,omitzero"`
	HardStop      time.Time    `json:"hardStop,omitzero"`
	Exited        time.Time    `json:"exited,omitzero"` // when the master's exit was seen
	Reason        drain.Reason `json:"reason,omitempty"`
	Detail        string       `json:"detail,omitempty"` // what was pending or not observed when it ended
	Conditions    []Condition  `json:"conditions,omitempty"`
	// LateConnections: new connections counted after the in-flight window
	// of a withdrawn verdict (the drain's self-audit); above 0 the drain
	// cannot end routed-away.
	LateConnections int `json:"lateConnections,omitempty"`
	// ReloadsAfterSoftStop: workers that appeared after the soft stop (a
	// reload hapsuper did not send), each stopped again at once.
	ReloadsAfterSoftStop []ReloadAfterSoftStop `json:"reloadsAfterSoftStop,omitempty"`
}

// ReloadAfterSoftStop is a worker that appeared after the soft stop: it
// binds HAProxy's listeners again until it is stopped.
type ReloadAfterSoftStop struct {
	At            time.Time `json:"at"`
	AfterSoftStop Duration  `json:"afterSoftStop"` // from the (first) soft stop to At
	Worker        int       `json:"worker"`
	Via           string    `json:"via"`    // how it was seen: "show proc" or "a new child of the master"
	By            string    `json:"by"`     // who reloaded, as far as hapsuper knows
	Action        string    `json:"action"` // "soft stop sent again" or "hard stop sent again"
}

// Condition is one condition of a drain under way: quiet or routing.
type Condition struct {
	Name  string    `json:"name"`           // drain.ConditionQuiet or drain.ConditionRouting
	Met   bool      `json:"met"`            // holds now
	Since time.Time `json:"since,omitzero"` // quiet: last counted request (or drain start)
	// Detail is the quiet condition's detail, or, as a client reads it
	// from the JSON, either condition's (Text).
	Detail string `json:"detail,omitempty"`
	// Routing is the routing condition, typed, as the supervisor publishes
	// it: its detail is rendered when shown (Text, the JSON's detail).
	Routing *drain.Routing `json:"-"`
	// PendingNodes: routing only, the nodes whose kube-proxy has not confirmed.
	PendingNodes int `json:"pendingNodes,omitempty"`
}

// Text is the condition's detail as shown: rendered from Routing when the
// condition carries it, else Detail.
func (c Condition) Text() string {
	if c.Routing != nil {
		return c.Routing.Stated()
	}
	return c.Detail
}

// MarshalJSON writes the condition with its detail rendered (Text).
func (c Condition) MarshalJSON() ([]byte, error) {
	type plain Condition
	p := plain(c)
	p.Detail = c.Text()
	return json.Marshal(p)
}

// Worker is one HAProxy worker as last observed.
type Worker struct {
	PID int `json:"pid"`
	// Old: a worker that is finishing (listed under "old workers" by show
	// proc and stopping). A worker that show proc lists as old but that does
	// not stop is the serving one kept by a failed reload (HAProxy 3.1+):
	// it is current.
	Old      bool   `json:"old"`
	Sessions int64  `json:"sessions"`
	Requests uint64 `json:"requests"` // counted frontends' stot + req_tot
	// Connections is what quiet counts once routing is withdrawn: stot of
	// the frontends whose soft stop is graceful, stot + req_tot of the others.
	Connections uint64 `json:"connections"`
}

// Settings are the timings the drain runs with, echoed for the reader.
type Settings struct {
	GracePeriod Duration `json:"gracePeriod"`
	QuietPeriod Duration `json:"quietPeriod"`
	// WithdrawnQuietPeriod: quiet on new connections once routing is withdrawn.
	WithdrawnQuietPeriod Duration `json:"withdrawnQuietPeriod"`
	MaxWait              Duration `json:"maxWait"`
	Margin               Duration `json:"margin"`
	PollInterval         Duration `json:"pollInterval"`
	Routing              string   `json:"routing"`
}

// Duration marshals as a Go duration string ("2s").
type Duration time.Duration

// MarshalText implements encoding.TextMarshaler.
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	*d = Duration(v)
	return err
}

// Board holds the latest Snapshot. The supervisor's loop publishes, the
// server reads; the lock covers a copy only.
type Board struct {
	mu   sync.Mutex
	snap Snapshot
}

// NewBoard returns a Board holding s.
func NewBoard(s Snapshot) *Board { return &Board{snap: s} }

// Publish replaces the snapshot. The caller must not modify s afterwards.
func (b *Board) Publish(s Snapshot) {
	b.mu.Lock()
	b.snap = s
	b.mu.Unlock()
}

// Load returns the current snapshot.
func (b *Board) Load() Snapshot {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.snap
}
