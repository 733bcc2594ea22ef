// Package sidecar is `hapsuper sidecar`: the drain for an HAProxy container
// that hapsuper does not run, as a native sidecar beside it (an init
// container with restartPolicy Always). It reads HAProxy's master CLI on a
// volume both containers mount, watches the pod and its routing as PID 1
// mode does, and serves a gate that the HAProxy container's preStop hook
// asks: held while the pod is being deleted, until the drain ends, so that
// the kubelet's stop signal (HAProxy's soft stop) comes only then.
//
// It must not signal, stop or reload HAProxy, or change anything on a
// request: the gate only answers, at once or when the drain ended. It reuses
// drain/ (the decision), routing/ (the pod, its Services, kube-proxy),
// supervisor's master-CLI poller and status/ (docs/sidecar.md).
package sidecar
