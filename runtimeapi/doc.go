// Package runtimeapi is hapsuper's client of HAProxy's master CLI (the socket
// given to `haproxy -S`): `show proc`, and every worker's `show info` and
// `show stat` in one Sample, old workers included, with typed results; and,
// for the health check of load balancers that check the pod (--lb-check-bind),
// a worker's `show table` and `set server <backend>/<server> state`.
//
// It is the project's own, not client-native's runtime package: a reply cut
// short is an error, never a short result. The protocol as measured on
// HAProxy 2.6, 3.0, 3.2 and 3.4 is in docs/master-cli.md (the differences
// per version in docs/haproxy-versions.md).
//
// The package must not: keep connections open between calls, retry a failed
// call, interpret counters (drain/ does), log, or send any command but
// those. `set server … state` is its one write, and the supervisor sends it
// only to the server of the health-check backend hapsuper adds
// (haproxy.LBCheckServer); every other command reads.
package runtimeapi
