// Package kube is the cluster side of the harness, shared by test/k8s,
// test/manifests and bench/rollout: deploy/'s overlays rendered as
// `kubectl apply -k` would send them, applied server-side; an Env that
// grants hapsuper's ServiceAccount the RBAC of the rendered kube-proxy
// overlay (the grants the tests prove, not a copy), writes its kubeconfig
// and starts containers in k8stest's pods with the downward-API
// environment.
//
// It must never be imported by hapsuper's own packages.
package kube
