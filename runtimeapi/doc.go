// Package runtimeapi is hapsuper's client of HAProxy's master CLI (the socket
// given to `haproxy -S`): `show proc`, and every worker's `show info` and
// `show stat` in one Sample, old workers included, with typed results.
//
// It is the project's own, not client-native's runtime package: a reply cut
// short is an error, never a short result. The protocol as measured on
// HAProxy 2.6, 3.0, 3.2 and 3.4 is in docs/master-cli.md (the differences
// per version in docs/haproxy-versions.md).
//
// The package must not: keep connections open between calls, retry a failed
// call, interpret counters (drain/ does), log, or send anything but those
// read-only commands.
package runtimeapi
