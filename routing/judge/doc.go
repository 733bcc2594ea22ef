// Package judge is routing's judgement: when a path to this pod is
// withdrawn in the API (path.go), when a node's kube-proxy provably holds
// the withdrawal (sync.go), when a load balancer that health-checks the
// node has marked it down (balancer.go), which paths are not observed
// (unobserved.go), and how these conditions combine into the drain's
// routing condition, which carries them on typed; their text (Verdict.Text)
// is written where the detail is shown (verdict.go, conditions.go).
//
// The confirmation rule rests on three durations (Rule): MinSync,
// kube-proxy's minSyncPeriod, which cannot be observed and must be at least
// the cluster's; Allowance (D), how late kube-proxy may get a change after
// us plus one sync, so that a sync completed D after our receipt holds it;
// and Lag, how much earlier than us kube-proxy may get a change, so that a
// sync up to Lag before our receipt is ambiguous, not "no sync since".
// docs/routing.md gives the measurements behind their defaults.
//
// It must not do I/O, read the clock or import a network or Kubernetes
// client: routing's shell feeds it facts with their times, so tests drive
// every rule with plain values (deps_test.go checks the imports).
package judge
