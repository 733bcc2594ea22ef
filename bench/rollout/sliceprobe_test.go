package main

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	discovery "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/hapsuper/hapsuper/test/k8s/k8stest"
)

// newProbe returns a probe on a fake API whose stand-in for the
// EndpointSlice controller, when ready is not nil, writes the probe
// Service's slice as the Pod's status update arrives, the endpoint's
// ready condition set to *ready.
func newProbe(t *testing.T, ready *bool) (sliceProbe, *fake.Clientset) {
	t.Helper()
	client := fake.NewClientset()
	if ready != nil {
		client.PrependReactor("patch", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
			if a.GetSubresource() != "status" {
				return false, nil, nil
			}
			name := a.(k8stesting.PatchAction).GetName()
			slice := &discovery.EndpointSlice{
				ObjectMeta:  metav1.ObjectMeta{Name: name + "-abcde", Namespace: "default", Labels: map[string]string{discovery.LabelServiceName: name}},
				AddressType: discovery.AddressTypeIPv4,
				Endpoints:   []discovery.Endpoint{{Addresses: []string{probeIP}, Conditions: discovery.EndpointConditions{Ready: ready}}},
			}
			if err := client.Tracker().Create(discovery.SchemeGroupVersion.WithResource("endpointslices"), slice, "default"); err != nil {
				t.Errorf("write the probe's slice: %v", err)
			}
			return false, nil, nil // the status update itself goes on to the tracker
		})
	}
	node := &k8stest.Node{Name: "node1", IP: netip.MustParseAddr("10.250.0.2")}
	return sliceProbe{client: client, ns: "default", node: node, every: 10 * time.Millisecond}, client
}

// A controller that lists the probe Pod ready answers the probe, and
// remove leaves neither Service, Pod nor slice behind.
func TestSliceProbeAnsweredAndRemoved(t *testing.T) {
	p, client := newProbe(t, ptr.To(true))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := p.wait(ctx, "slice-probe-1"); err != nil {
		t.Fatalf("wait: %v", err)
	}
	pod, err := client.CoreV1().Pods("default").Get(ctx, "slice-probe-1", metav1.GetOptions{})
	if err != nil || pod.Status.PodIP != probeIP || pod.Labels["app"] != "slice-probe-1" || pod.Spec.NodeName != "node1" {
		t.Errorf("probe Pod: %+v, %v", pod, err)
	}
	svc, err := client.CoreV1().Services("default").Get(ctx, "slice-probe-1", metav1.GetOptions{})
	if err != nil || svc.Spec.ClusterIP != "None" || svc.Spec.Selector["app"] != "slice-probe-1" {
		t.Errorf("probe Service (headless, selecting the Pod): %+v, %v", svc, err)
	}
	if err := p.remove(ctx, "slice-probe-1"); err != nil {
		t.Fatalf("remove: %v", err)
	}
	if _, err := client.CoreV1().Services("default").Get(ctx, "slice-probe-1", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("Service after remove: %v", err)
	}
	if _, err := client.CoreV1().Pods("default").Get(ctx, "slice-probe-1", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("Pod after remove: %v", err)
	}
	if l, err := client.DiscoveryV1().EndpointSlices("default").List(ctx, metav1.ListOptions{}); err != nil || len(l.Items) != 0 {
		t.Errorf("slices after remove: %v, %v", l, err)
	}
	if err := p.remove(ctx, "slice-probe-1"); err != nil {
		t.Errorf("remove of what is gone: %v", err)
	}
}

// Without a controller, or with one that lists the Pod not ready, the
// probe ends with its context and says what it waited for.
func TestSliceProbeUnanswered(t *testing.T) {
	for name, ready := range map[string]*bool{"no controller": nil, "endpoint not ready": ptr.To(false)} {
		t.Run(name, func(t *testing.T) {
			p, _ := newProbe(t, ready)
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			err := p.wait(ctx, "slice-probe-2")
			if err == nil || !strings.Contains(err.Error(), "no EndpointSlice of probe Service slice-probe-2 listed its pod ready") {
				t.Errorf("wait = %v; want the timeout", err)
			}
		})
	}
}

func TestListsReady(t *testing.T) {
	ep := func(addr string, ready *bool) discovery.EndpointSlice {
		return discovery.EndpointSlice{Endpoints: []discovery.Endpoint{{Addresses: []string{addr}, Conditions: discovery.EndpointConditions{Ready: ready}}}}
	}
	for _, tc := range []struct {
		name   string
		slices []discovery.EndpointSlice
		want   bool
	}{
		{"ready", []discovery.EndpointSlice{ep(probeIP, ptr.To(true))}, true},
		{"unset means ready", []discovery.EndpointSlice{ep(probeIP, nil)}, true},
		{"not ready", []discovery.EndpointSlice{ep(probeIP, ptr.To(false))}, false},
		{"another address", []discovery.EndpointSlice{ep("10.251.1.2", ptr.To(true))}, false},
		{"in the second slice", []discovery.EndpointSlice{{}, ep(probeIP, ptr.To(true))}, true},
		{"no slice", nil, false},
	} {
		if got := listsReady(tc.slices, probeIP); got != tc.want {
			t.Errorf("%s: listsReady = %v; want %v", tc.name, got, tc.want)
		}
	}
}
