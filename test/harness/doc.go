// Package k8sdrain holds the pieces shared by the drain tests and the
// rollout benchmark: the reader of hapsuper's JSON log and the client that
// sends one request through a Service's ClusterIP and records what
// happened.
//
// It is shared by the drain tests and the rollout benchmark; it must never
// be imported by hapsuper's own packages.
package harness
