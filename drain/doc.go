// Package drain decides when a stopping HAProxy may close its listeners and
// when it must be killed.
//
// It is the state machine of a pod's stop: it is fed the stop request, polls
// of HAProxy's counters (Observation), the routing condition (Routing), the
// pod's own grace period when routing/ sees it, and a clock; Tick answers
// which action the supervisor must take now (SoftStop, HardStop or None) and
// Status says why.
//
// It must not do I/O, start goroutines or read the clock: every input carries
// its own time, so tests drive it step by step and the supervisor owns every
// side effect (deps_test.go checks the imports and the clock reads). It
// imports nothing of the project: routing/'s typed conditions reach it as
// RoutingConditions, carried to where the detail is shown. A Drain is not
// safe for concurrent use: one goroutine feeds it.
package drain
