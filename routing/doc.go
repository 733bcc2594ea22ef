// Package routing observes whether anything still routes new connections to
// this pod, so that a draining HAProxy closes its listeners only once nothing
// does. It answers drain.Routing: withdrawn, pending or unverified, with a
// detail naming what is pending or was not observed. It watches the pod,
// its Services and EndpointSlices (ModeEndpointSlices) and, after the stop
// request, every node's kube-proxy healthz (ModeKubeProxy); paths kube-proxy
// does not carry are never withdrawn, only unverified. docs/routing.md is
// the specification: when a path is withdrawn, the confirmation rules with
// the measurements behind them, and what they rest on.
//
// It must not end a drain by itself, panic, or let an API or healthz error
// count as withdrawn: errors degrade the verdict to unverified or pending.
// Every goroutine it starts ends before Run returns, and every request is
// bounded by RequestTimeout.
package routing
