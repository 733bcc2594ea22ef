package main

import (
	"context"
	"net/netip"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/hapsuper/hapsuper/test/harness"
	"github.com/hapsuper/hapsuper/test/harness/kube"
	"github.com/hapsuper/hapsuper/test/k8s/k8stest"
)

// env is one cluster prepared for the benchmark as the drain tests prepare
// theirs (kube.Env: the rendered kube-proxy overlay's RBAC, a kubeconfig of
// its ServiceAccount), with the Service under test.
type env struct {
	*kube.Env
	clusterIP netip.Addr
}

// Service ports: HTTP/1.1 on 80 → 8080, h2c (prior knowledge) on 81 → 8081.
const (
	serviceName = "web"
	httpPort    = 80
	h2Port      = 81
)

// newEnv starts the cluster, kube-proxy's metrics on the node address
// when metrics, and creates the Service. Harness failures end
// the run through t.
func newEnv(ctx context.Context, t harness.TB, nodes int, proxyMode string, metrics bool) (*env, error) {
	e := &env{Env: kube.NewEnv(t, k8stest.Options{Nodes: nodes, ProxyMode: proxyMode, MinSyncPeriod: time.Second, KubeProxyMetrics: metrics})}
	var err error
	e.clusterIP, err = e.Service(ctx, serviceName, false,
		corev1.ServicePort{Name: "http", Port: httpPort, TargetPort: intstr.FromInt32(8080)},
		corev1.ServicePort{Name: "h2", Port: h2Port, TargetPort: intstr.FromInt32(8081)})
	return e, err
}

// kubeProxyMetricsPort is where -kube-proxy-metrics has kube-proxy serve
// its metrics on each node's address.
const kubeProxyMetricsPort = k8stest.MetricsPort

// metricsFlag is the flag a report prints for the metrics witness.
func metricsFlag(on bool) string {
	if on {
		return " -kube-proxy-metrics"
	}
	return ""
}
