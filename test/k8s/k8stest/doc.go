// Package k8stest runs a small real Kubernetes cluster on one machine for
// tests: etcd, kube-apiserver (RBAC on), kube-controller-manager (only the
// endpointslice and serviceaccount controllers) and one kube-proxy per node,
// with network namespaces standing in for nodes and pods. The test itself
// plays the kubelet: it creates pod objects bound to a node, gives each pod a
// network namespace with an address, and patches the pod status (Ready,
// podIPs) when it chooses. Tests can then delete pods and watch kube-proxy
// withdraw them, freeze kube-proxy, or read its healthz.
//
// With Options.KubeletNode, one node runs a real kubelet instead, with
// Debian's containerd and runc, the CNI bridge and host-local plugins and a
// pause image built from Kubernetes' pause.c: pods bound to it (nodeName)
// are run from imported images, stopped and exec'd into as on a real
// cluster, and the controller-manager adds the deployment, replicaset and
// root-ca-cert-publisher controllers.
//
// Requirements: root, iproute2, nftables, iptables and conntrack, and the
// binaries built by hack/k8s-binaries.sh (found in $HAPSUPER_K8S_BIN, or in
// the cache directory that script prints). Without them a test is skipped,
// or fails when CI=true.
//
// Network layout of one harness (slot s is chosen per run so that parallel
// runs do not clash):
//
//	host         hs<pid>_<seq>h  10.250.s.1/24 (apiserver listens here)
//	fabric ns    bridge br0 joining the host veth and every node veth
//	node i ns    eth0 10.250.s.(10+i)/24, pods 10.251.16i.0/20, ip_forward=1,
//	             routes to the other nodes' pod ranges over the bridge,
//	             pod traffic to non-pods masqueraded (the host has no pod routes)
//	pod ns       eth0 an address of its node's /20 as /32, default route to its node (proxy ARP)
//
// Clients the harness dials from a node or a pod take their TCP source ports
// in turn (srcport.go), and pods keep no TIME_WAIT sockets, so that
// kube-proxy's masquerade never meets a tuple a pod still holds.
//
// Everything a harness creates is removed by t.Cleanup, on failure too; a
// harness started after a crashed run removes that run's namespaces,
// interfaces, processes and temporary directories first.
//
// It reports through a harness.TB: a *testing.T, or the harness.Program
// of a bench/ command. This package is for tests and benchmarks only:
// nothing but _test.go files, test/harness and the bench/ commands may
// import it (never hapsuper's own packages), and it must never send traffic
// anywhere but to the namespaces it made.
package k8stest
