package routing

import (
	"context"
	"net"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/pager"

	"github.com/hapsuper/hapsuper/routing/judge"
)

// nodePageSize is how many nodes one list request returns: a page of full
// Node objects (~10 KB each) is what the list holds in memory at once.
const nodePageSize = 250

// nodeRelist is how often the node list is read again while a node has not
// confirmed, so that nodes deleted or NotReady meanwhile leave the set.
const nodeRelist = 5 * time.Second

// listNodes reads the nodes whose kube-proxy must confirm, in pages, and
// keeps what is known of the nodes already in the set. Nodes that are gone
// or NotReady (Ready condition False or Unknown) leave the set, and the
// verdict's detail names them (nodeState of a node that comes back starts
// afresh). A failure is logged and leaves the set as it was; the first
// list is retried on the next round.
func (o *Observer) listNodes(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, nodeListTimeout)
	defer cancel()
	o.mu.Lock()
	old := o.nodes
	o.listedAt = o.clock.Now()
	o.mu.Unlock()
	next := make(map[string]*judge.Node, len(old))
	left := map[string]string{}
	p := pager.New(pager.SimplePageFunc(func(opts metav1.ListOptions) (runtime.Object, error) {
		return o.client.ListNodes(ctx, opts)
	}))
	p.PageSize, p.PageBufferSize = nodePageSize, 0
	err := p.EachListItem(ctx, metav1.ListOptions{}, func(obj runtime.Object) error {
		node, ok := obj.(*corev1.Node)
		if !ok {
			return nil
		}
		if why := notReady(node); why != "" {
			left[node.Name] = why
			return nil
		}
		next[node.Name] = o.nodeStateOf(node, old[node.Name])
		return nil
	})
	if err != nil {
		o.log.Warn("node list failed", "err", err)
		o.mu.Lock()
		defer o.mu.Unlock()
		if o.nodes == nil {
			o.nodesErr = "list nodes: " + err.Error()
			if apierrors.IsForbidden(err) {
				o.nodesErr += " (kube-proxy mode needs a ClusterRole with list on nodes)"
			}
		}
		return false
	}
	for name, n := range old {
		if _, ok := next[name]; !ok && left[name] == "" {
			left[name] = "deleted"
		}
		if next[name] == nil || next[name].Addr != n.Addr {
			o.http.closeIdle(n.Addr) // not asked there again
			if o.cfg.MetricsPort != 0 {
				o.metrics.closeIdle(metricsAddr(n.Addr, o.cfg.MetricsPort))
			}
		}
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if old == nil {
		o.log.Info("nodes listed for kube-proxy confirmation", "nodes", len(next), "not ready", len(left))
	}
	for name, why := range left {
		if o.leftNodes[name] != why && (old == nil || old[name] != nil) {
			o.log.Info("node left the kube-proxy confirmation set", "node", name, "why", why)
		}
	}
	o.nodes, o.nodesErr, o.leftNodes = next, "", left
	o.baseline.stale = true
	o.forgetAsked()
	return true
}

// nodeStateOf is what is known of node: prev's state when its address is
// unchanged, else a new one.
func (o *Observer) nodeStateOf(node *corev1.Node, prev *judge.Node) *judge.Node {
	addr := ""
	if ip := internalIP(node); ip.IsValid() {
		addr = net.JoinHostPort(ip.String(), strconv.Itoa(o.cfg.HealthzPort))
	}
	if prev != nil && prev.Addr == addr {
		return prev
	}
	return judge.NewNode(node.Name, addr)
}

// notReady says why a node does not confirm: its Ready condition is False
// or Unknown (the node controller's verdict: kubelet stopped reporting).
// A node without a Ready condition yet stays in the set.
func notReady(node *corev1.Node) string {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status != corev1.ConditionTrue {
			return "NotReady (" + string(c.Status) + ")"
		}
	}
	return ""
}

// relistDue says whether the set should be read again: a node has not
// confirmed and nodeRelist passed since the last list, or since the drain
// started; while the pod serves, every baselineRelist periods (baseline.go).
func (o *Observer) relistDue() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.serving() {
		return o.clock.Since(o.listedAt) >= baselineRelist*o.baselineEvery()
	}
	// A list read while serving is read again nodeRelist into the drain,
	// not at its start: the first sweep would wait for a list of
	// thousands of nodes (a few hundred ms), and the set is a period old
	// at most.
	if o.clock.Since(maxTime(o.listedAt, o.drainSeen)) < nodeRelist {
		return false
	}
	targets := judge.Targets(o.watch.paths)
	for _, n := range o.nodes {
		if v, _ := o.judging.Rule.Node(n, targets); v != judge.NodeConfirmed {
			return true
		}
	}
	return false
}
