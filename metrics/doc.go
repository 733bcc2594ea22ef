// Package metrics is hapsuper's Prometheus endpoint: what the supervisor
// published on its status.Board, turned into metrics when Prometheus scrapes,
// plus the Go runtime and process metrics.
//
// Every hapsuper metric is computed at scrape time from the latest
// status.Snapshot (a custom prometheus.Collector that Loads the Board). The
// supervisor's loop therefore does no metrics work at all: it keeps
// publishing its snapshot after every event as it does for the status
// socket, a slow or stuck scraper cannot delay a drain, and the metrics can
// never disagree with `hapsuper status`.
//
// Metrics (all prefixed hapsuper_):
//
//	phase{phase}                      1 for the current phase, 0 for the four others
//	drains_total{reason}              1 once the drain ended with that reason; every reason is present
//	drain_duration_seconds            histogram, stop request to soft stop; one observation once the drain ended
//	deadline_seconds                  time left to the hard-stop deadline, negative past it; absent while none is known
//	haproxy_sessions                  current sessions summed over every worker, old ones included
//	haproxy_workers{kind}             workers by kind, "current" or "old" (left by a reload)
//	master_cli_up                     1 when the last poll of the master CLI succeeded
//
// A process drains at most once, so drains_total is 0 or 1 per reason; a
// fleet's sum over pods of increase(hapsuper_drains_total[1h]) is the number
// of drains and their reasons. deadline_seconds is absent rather than NaN
// before a deadline exists: absent series are what PromQL expects for "not
// applicable", and a NaN would poison min() and max() over a fleet.
//
// Routing metrics (pending Services and nodes) are not here yet: the
// snapshot carries no routing detail beyond the drain's conditions. They
// belong here, computed from the snapshot in the same way, when routing/
// lands.
//
// The HTTP server serves /metrics and /healthz. /healthz answers 200 as long
// as the process serves HTTP at all: it is a liveness answer, not readiness.
// It must not turn 503 when the drain starts: hapsuper keeps HAProxy serving
// until nothing routes to the pod, and a readiness probe failing on its own
// account would make Kubernetes withdraw the pod for the wrong reason (the
// kubelet already marks a terminating pod not ready). HAProxy's own frontend
// is what a readiness probe should hit.
//
// The package must not decide anything nor change the snapshot: it shows
// what the supervisor published. It must not run a goroutine that outlives
// Serve.
package metrics
