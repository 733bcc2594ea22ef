// Package metrics is hapsuper's Prometheus endpoint (/metrics, and /healthz
// for liveness): what the supervisor published on its status.Board, turned
// into metrics when Prometheus scrapes, plus the Go runtime and process
// metrics.
//
// Every metric is computed at scrape time from the latest status.Snapshot,
// so the supervisor's loop does no metrics work and the metrics always agree
// with `hapsuper status`. The metrics and why they look as they do are in
// docs/metrics.md.
//
// The package must not decide anything nor change the snapshot, and must not
// run a goroutine that outlives Serve.
package metrics
