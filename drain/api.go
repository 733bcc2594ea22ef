package drain

import "time"

// Phase is where the supervised HAProxy stands in its life.
type Phase string

// The phases, in order. A drain moves forward only.
const (
	Starting Phase = "starting" // HAProxy started, not yet answering
	Serving  Phase = "serving"  // ready, no stop requested
	Draining Phase = "draining" // stop requested, listeners still open, waiting for the conditions
	Stopping Phase = "stopping" // soft stop sent, waiting for the workers to finish
	Exited   Phase = "exited"   // the master is gone
)

// Reason says why the draining phase ended.
type Reason string

// The reasons a drain ends.
const (
	ReasonNone        Reason = ""
	ReasonRoutedAway  Reason = "routed-away" // every observed path withdrawn, then quiet
	ReasonQuiet       Reason = "quiet"       // routing not observed (off); quiet decided
	ReasonUnverified  Reason = "unverified"  // part of routing could not be observed; quiet decided
	ReasonBound       Reason = "bound"       // max wait reached with conditions pending
	ReasonUnavailable Reason = "unavailable" // bound reached while HAProxy's counters could not be read, and no reload explained it
)

// ReasonWithdrawnInAPI: every path withdrawn in the EndpointSlices (routing
// mode endpointslices), then quiet; kube-proxy's rules were not observed.
const ReasonWithdrawnInAPI Reason = "withdrawn-in-api"

// ReasonLBMarkedDown: every path kube-proxy carries withdrawn and confirmed,
// and the external path a load balancer sends through (externalTrafficPolicy
// Local, no other ready pod on the node) judged withdrawn by the load
// balancer's own health check: the node's check observed failing for the
// balancer's window; then no new connection for WithdrawnQuietPeriod.
const ReasonLBMarkedDown Reason = "lb-marked-down"

// Phases lists the phases in the order of a life: the one list status,
// metrics and docs take them from.
func Phases() []Phase { return []Phase{Starting, Serving, Draining, Stopping, Exited} }

// Reasons lists every reason a drain ends with.
func Reasons() []Reason {
	return []Reason{ReasonRoutedAway, ReasonLBMarkedDown, ReasonWithdrawnInAPI, ReasonQuiet, ReasonUnverified, ReasonBound, ReasonUnavailable}
}

// Settings are the drain's timings. They come validated from conf.
type Settings struct {
	QuietPeriod time.Duration // no counted request for this long = quiet
	MaxWait     time.Duration // bound of the draining phase, from the stop request
	GracePeriod time.Duration // the pod's terminationGracePeriodSeconds
	Margin      time.Duration // deadline = stop request + GracePeriod - Margin
	// WithdrawnQuietPeriod is the quiet period once routing is withdrawn,
	// on Worker.Connections; 0 means QuietPeriod.
	WithdrawnQuietPeriod time.Duration
	// UngracefulFrontends are the counted HTTP frontends whose soft stop is
	// not graceful (no option idle-close-on-response): their requests stay
	// in Worker.Connections. Named in the quiet detail.
	UngracefulFrontends []string
	// InFlightWindow is how long after a withdrawn verdict new connections
	// are still expected: those already on their way when the last path
	// changed, counted by the next readings. Later ones are late arrivals
	// (audit.go).
	InFlightWindow time.Duration
	// InFlightAllowance is how long after a confirmation's evidence
	// (Routing.SyncedBy) a new connection is still explained by it: a SYN
	// already on the wire when the last node's rules dropped the pod,
	// counted by a reading that ends up to two poll intervals later.
	InFlightAllowance time.Duration
	// PollInterval is how often the counters are read while draining: a
	// reading that comes later than it after the one before counts
	// connections an on-time reading would have counted sooner, and they
	// are judged as of then (audit.go). 0: every reading is on time.
	PollInterval time.Duration
}

// Worker is one HAProxy worker process as seen in one observation.
type Worker struct {
	PID int
	Old bool // an old worker left by a reload
	// Requests is every counted frontend's stot + req_tot: new connections
	// and requests, kept-alive ones included. Quiet counts it unless routing
	// is withdrawn.
	Requests uint64
	// Connections is what counts once routing is withdrawn: stot of the
	// frontends whose soft stop ends established connections cleanly (TCP,
	// HTTP with option idle-close-on-response), stot + req_tot of the
	// others. Requests on connections opened before the withdrawal say
	// nothing about routing.
	Connections uint64
	Sessions    int64 // current sessions (show info CurrConns)
	// Accepted is each counted frontend's stot: new connections only,
	// which the audit of a withdrawn verdict accounts for (audit.go).
	Accepted map[string]uint64
	// Opened is each counted frontend's conn_tot: the connections it
	// accepted, which the worker's stop line gives final once it stops
	// accepting (Drain.WorkerStopped); nil when HAProxy does not show it.
	Opened map[string]uint64
}

// Observation is one poll of HAProxy's master CLI. Err set means the poll
// failed and Workers is not to be trusted.
type Observation struct {
	At      time.Time
	Workers []Worker
	Err     error
	// Reloading, with Err only, says the poll failed while HAProxy
	// reloads: the master process is alive and a reload recent enough to
	// explain a master CLI that does not answer (a master re-executing
	// refuses connections) is under way, as the supervisor judges it,
	// bounded. The counters are unknown all the same, so quiet is not
	// proved; but HAProxy has not stopped answering: a drain that reaches
	// its bound so ends ReasonBound, not ReasonUnavailable.
	Reloading bool
	// Reloads is the master's reload count at a successful poll (0 when
	// unknown). Over a blind spell it says how many workers can have come:
	// more reloads than new workers seen may hide one that came and went
	// unseen.
	Reloads int
	// Loading lists the PIDs of current workers the master lists but whose
	// counters could not be read yet (a reload's new worker still loading
	// its configuration: it has served nothing): workers that exist, for
	// the count of new workers against reloads.
	Loading []int
	// Ungraceful lists, sorted, the counted HTTP frontends whose requests
	// count in Worker.Connections at this poll (no inspection of the
	// configuration after the last reload said their soft stop is
	// graceful); nil: unchanged. When it changes, Connections is summed
	// over another set and is compared through Requests for that poll.
	Ungraceful []string
}

// RoutingState is the routing condition as reported by routing/.
type RoutingState string

// Routing states.
const (
	RoutingOff        RoutingState = "off"        // not observed at all (mode off)
	RoutingPending    RoutingState = "pending"    // still routed to this pod somewhere
	RoutingWithdrawn  RoutingState = "withdrawn"  // observed withdrawn everywhere
	RoutingUnverified RoutingState = "unverified" // part of the paths cannot be observed
)

// Routing is the routing condition at one instant.
type Routing struct {
	State RoutingState
	// Why is what routing/ observed behind State, as typed conditions
	// (routing/judge's Verdict); nil when nothing was observed. The drain
	// decides on State alone and carries Why to where the detail is shown
	// (Detail).
	Why RoutingConditions
	// PodCheck is the pod's own health check, once the drain combined it
	// with routing/'s State (SetPodCheck); nil without one.
	PodCheck *PodCheck
	// PendingNodes counts the nodes whose kube-proxy has not confirmed the
	// withdrawal yet (kube-proxy mode). Shown by status and metrics; the
	// drain decides on State alone.
	PendingNodes int
	// APIOnly says a withdrawn State rests on the API alone: kube-proxy was
	// not observed (endpointslices mode). It ends a drain with
	// ReasonWithdrawnInAPI instead of ReasonRoutedAway.
	APIOnly bool
	// Balancer says a withdrawn State includes an external path judged by a
	// load balancer's health check rather than by kube-proxy's rules: the
	// balancer's window passed since the node's check was seen failing. It
	// ends a drain with ReasonLBMarkedDown (unless APIOnly).
	Balancer bool
	// Confirmed says a withdrawn State rests on every node's kube-proxy
	// having programmed the withdrawal, and on nothing else (no balancer,
	// no load balancer delay, no path unobserved): no path the verdict sees
	// sends a new connection here after the confirming syncs. SyncedBy is
	// when the last of them can have completed, our clock; zero when a
	// node's confirmation does not date its sync (the verdict's own
	// instant then stands).
	Confirmed bool
	SyncedBy  time.Time
}

// RoutingConditions are routing/'s typed conditions behind a Routing. Text
// says them for the detail; a value must not change once handed over,
// since status reads it from another goroutine.
type RoutingConditions interface {
	Text() string
}

// RoutingObservationOff is the routing condition when routing is not
// observed at all (mode off).
func RoutingObservationOff() Routing { return Routing{State: RoutingOff, Why: observationOff{}} }

type observationOff struct{}

func (observationOff) Text() string { return "routing observation off" }

// Action is what the supervisor must do to HAProxy after a Tick.
type Action string

// Actions.
const (
	None     Action = ""
	SoftStop Action = "soft-stop" // SIGUSR1 to the master
	HardStop Action = "hard-stop" // SIGTERM to the master
)

// Condition is one condition of a drain under way.
type Condition struct {
	Name   string    // ConditionQuiet or ConditionRouting
	Met    bool      // holds now
	Since  time.Time // quiet: last counted request (or drain start)
	Detail string    // quiet only: what the quiet rule waits for
	// Routing: routing only, the condition, typed; Stated renders it.
	Routing *Routing
	// PendingNodes: routing only, the nodes whose kube-proxy has not confirmed.
	PendingNodes int
}

// Status is a copy of the drain's state. It is no interface of its own:
// status/ shows users its own types, filled from this one.
type Status struct {
	Phase      Phase
	StopAt     time.Time // when the stop was requested
	BoundAt    time.Time // end of max wait
	Deadline   time.Time // hard stop
	SoftStopAt time.Time
	HardStopAt time.Time // when Tick returned HardStop
	ExitedAt   time.Time // when the master exit was recorded
	Reason     Reason
	Detail     string // what was pending / not observed when it ended
	Conditions []Condition
	Workers    []Worker
	// LateConnections counts the new connections that arrived after the
	// in-flight window of a withdrawn verdict (audit.go).
	LateConnections int
}
