package routing

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
)

// probeTimeout bounds PickMode: the node list and one healthz request.
const probeTimeout = 3 * time.Second

// PickMode is the mode `auto` runs in once credentials and identity are
// there: ModeKubeProxy when the service account may list nodes and this
// node's kube-proxy answers healthz with per-family status (1.33+),
// otherwise ModeEndpointSlices. why says what decided, for the log. It
// takes at most probeTimeout.
func PickMode(ctx context.Context, client API, id Identity, healthzPort int) (mode Mode, why string) {
	if healthzPort == 0 {
		healthzPort = DefaultHealthzPort
	}
	return pickMode(ctx, client, id, healthzPort, (&net.Dialer{}).DialContext)
}

func pickMode(ctx context.Context, client API, id Identity, port int, dial dialFunc) (Mode, string) {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	// list, not get: the kube-proxy mode's ClusterRole grants list alone.
	list, err := client.ListNodes(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", id.NodeName).String(),
	})
	switch {
	case apierrors.IsForbidden(err):
		return ModeEndpointSlices, "the service account may not list nodes (kube-proxy mode needs a ClusterRole with list on nodes)"
	case err != nil:
		return ModeEndpointSlices, "list nodes: " + err.Error()
	}
	var ip netip.Addr
	found := false
	for i := range list.Items {
		if list.Items[i].Name == id.NodeName {
			ip, found = internalIP(&list.Items[i]), true
		}
	}
	if !found {
		return ModeEndpointSlices, fmt.Sprintf("node %s not found", id.NodeName)
	}
	if !ip.IsValid() {
		return ModeEndpointSlices, fmt.Sprintf("node %s has no InternalIP to reach kube-proxy at", id.NodeName)
	}
	addr := net.JoinHostPort(ip.String(), strconv.Itoa(port))
	hc := newHealthzClient(dial, 500*time.Millisecond)
	defer hc.CloseIdleConnections()
	h, _, _, _, err := hc.fetch(ctx, addr, time.Second)
	switch {
	case err != nil:
		return ModeEndpointSlices, fmt.Sprintf("kube-proxy healthz of node %s: %v", id.NodeName, err)
	case h.Proxy.NoSync():
		return ModeEndpointSlices, fmt.Sprintf("healthz of node %s at %s answers as %s: %s", id.NodeName, addr, h.Proxy, h.Proxy.Why())
	}
	return ModeKubeProxy, fmt.Sprintf("nodes can be listed and kube-proxy healthz of node %s at %s answers with per-family status", id.NodeName, addr)
}
