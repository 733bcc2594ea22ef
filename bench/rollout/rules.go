package main

import (
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"sync"
	"time"

	"github.com/hapsuper/hapsuper/test/k8s/k8stest"
)

// rules reads, from a node's nftables, which endpoints kube-proxy's rules
// send the Service's HTTP port to: the ground truth of "routed to". It
// lists the service chain (service-<hash>-default/web/tcp/http), which
// names each endpoint's address and port.
type rules struct {
	mode   string // kube-proxy's: nftables (default) or iptables
	mu     sync.Mutex
	chains map[string]string // node netns → service chain name
}

var (
	serviceChain = regexp.MustCompile(`chain (service-[A-Z0-9]+-default/` + serviceName + `/tcp/http) \{`)
	// kube-proxy 1.37 DNATs from the service chain through a map
	// "{ 0 : 10.251.1.2 . 8080, … }"; older ones jump to endpoint chains
	// named "…__10.251.1.2/8080".
	endpointRef = regexp.MustCompile(`(?:^|[^0-9.])([0-9]+\.[0-9]+\.[0-9]+\.[0-9]+)(?: \. |/|:)8080\b`)
)

// endpoints returns the pod IPs node's rules balance the Service over.
func (r *rules) endpoints(ctx context.Context, n *k8stest.Node) (map[string]bool, error) {
	if r.mode == "iptables" {
		return iptablesEndpoints(ctx, n)
	}
	r.mu.Lock()
	chain := r.chains[n.NetNS]
	r.mu.Unlock()
	if chain == "" {
		out, err := nft(ctx, n, "list", "table", "ip", "kube-proxy")
		if err != nil {
			return nil, err
		}
		m := serviceChain.FindSubmatch(out)
		if m == nil {
			return map[string]bool{}, nil // not programmed yet
		}
		chain = string(m[1])
		r.mu.Lock()
		if r.chains == nil {
			r.chains = map[string]string{}
		}
		r.chains[n.NetNS] = chain
		r.mu.Unlock()
	}
	out, err := nft(ctx, n, "list", "chain", "ip", "kube-proxy", chain)
	if err != nil {
		return nil, err
	}
	ips := map[string]bool{}
	for _, m := range endpointRef.FindAllSubmatch(out, -1) {
		ips[string(m[1])] = true
	}
	return ips, nil
}

// nft runs nft with args in n's network namespace (bounded to 5 s).
func nft(ctx context.Context, n *k8stest.Node, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", n.NetNS, "nft"}, args...)...).Output()
	if err != nil {
		return nil, fmt.Errorf("nft %v on %s: %w", args, n.Name, err)
	}
	return out, nil
}

// waitExactly waits (bounded by ctx) until every node's rules balance over
// exactly ips.
func (r *rules) waitExactly(ctx context.Context, nodes []*k8stest.Node, ips ...string) error {
	for _, n := range nodes {
		for {
			got, err := r.endpoints(ctx, n)
			if err == nil && len(got) == len(ips) && hasAll(got, ips) {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("wait for %s's rules to hold exactly %v (have %v, %v): %w", n.Name, ips, got, err, ctx.Err())
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	return nil
}

func hasAll(set map[string]bool, ips []string) bool {
	for _, ip := range ips {
		if !set[ip] {
			return false
		}
	}
	return true
}

// withdrawalWatch polls node's rules every 50 ms from now until ip is gone
// from them (or ctx ends). The drop lies between seen, the start of the
// last listing that still held ip (zero when the first one did not), and
// gone, the end of the first listing without it: a listing reads the
// kernel at some instant between its start and its end, and under load
// one takes far longer than the 50 ms between them. gone is zero when ctx
// ended first.
func (r *rules) withdrawalWatch(ctx context.Context, n *k8stest.Node, ip string) (seen, gone time.Time) {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		began := time.Now()
		got, err := r.endpoints(ctx, n)
		switch {
		case err == nil && !got[ip]:
			return seen, time.Now()
		case err == nil:
			seen = began
		}
		select {
		case <-ctx.Done():
			return seen, time.Time{}
		case <-tick.C:
		}
	}
}

// svcJump is an iptables kube-proxy's jump from the Service chain to an
// endpoint's: -A KUBE-SVC-… -m comment --comment "default/web:http -> 10.251.16.2:8080" -j KUBE-SEP-….
var svcJump = regexp.MustCompile(`(?m)^-A KUBE-SVC-\S+ .*"default/` + serviceName + `:http -> ([0-9.]+):8080" .*-j KUBE-SEP-`)

// iptablesEndpoints reads the endpoints from node's nat table, as an
// iptables kube-proxy programs it.
func iptablesEndpoints(ctx context.Context, n *k8stest.Node) (map[string]bool, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "ip", "netns", "exec", n.NetNS, "iptables-save", "-t", "nat").Output()
	if err != nil {
		return nil, fmt.Errorf("iptables-save on %s: %w", n.Name, err)
	}
	ips := map[string]bool{}
	for _, m := range svcJump.FindAllSubmatch(out, -1) {
		ips[string(m[1])] = true
	}
	return ips, nil
}
