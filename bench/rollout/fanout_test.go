package main

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The fan-out's API pages the node list as an API server does: limit
// nodes a page, a continue token to the next, none after the last; a
// token it did not give is an error, not a silent restart.
func TestPagedNodes(t *testing.T) {
	p := &pagedNodes{nodes: 5, node: fanoutNode}
	var got []string
	pages := 0
	opts := metav1.ListOptions{Limit: 2}
	for {
		list, err := p.ListNodes(t.Context(), opts)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		if len(list.Items) > 2 {
			t.Fatalf("page %d holds %d nodes, limit 2", pages, len(list.Items))
		}
		for _, n := range list.Items {
			got = append(got, n.Name)
		}
		if list.Continue == "" {
			break
		}
		opts.Continue = list.Continue
	}
	if want := "[node-0 node-1 node-2 node-3 node-4]"; fmt.Sprint(got) != want || pages != 3 {
		t.Errorf("%d pages of %v, want 3 of %s", pages, got, want)
	}
	if list, err := p.ListNodes(t.Context(), metav1.ListOptions{}); err != nil || len(list.Items) != 5 || list.Continue != "" {
		t.Errorf("without a limit: %v, want all 5 nodes in one page", err)
	}
	list, _ := p.ListNodes(t.Context(), metav1.ListOptions{Limit: 1})
	list.Items[0].Name = "changed"
	if again, _ := p.ListNodes(t.Context(), metav1.ListOptions{Limit: 1}); again.Items[0].Name != "node-0" {
		t.Error("a listed node is the API's own, not a copy")
	}
	if a := list.Items[0].Status.Addresses; len(a) != 1 || a[0].Type != corev1.NodeInternalIP || a[0].Address != nodeAddr(0).String() {
		t.Errorf("node-0's addresses %v, want its InternalIP %s", a, nodeAddr(0))
	}
	for _, bad := range []string{"x", "-1", "6"} {
		if _, err := p.ListNodes(t.Context(), metav1.ListOptions{Limit: 2, Continue: bad}); err == nil {
			t.Errorf("continue token %q accepted", bad)
		}
	}
}
