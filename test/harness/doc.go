// Package harness is what the black-box suites (test/integration, test/k8s,
// test/image) and the benchmarks (bench/) share, so that a benchmark
// measures with the code the tests prove: the hapsuper binary built once,
// the reader of its JSON log, the outcome kinds of a request and their
// classifier, and the record of concurrent clients' outcomes. Its
// subpackage kube is the cluster side: the rendered deploy/ overlays, the
// ServiceAccount's grants and kubeconfig, hapsuper started in a pod.
//
// It must never be imported by hapsuper's own packages.
package harness
