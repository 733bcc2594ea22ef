package routing

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/hapsuper/hapsuper/routing/judge"
)

// meTrimmer trims as the observer of me does.
func meTrimmer(t *testing.T) trimmer {
	t.Helper()
	addrs, err := me.addrs()
	if err != nil {
		t.Fatal(err)
	}
	return trimmer{match: judge.Matcher{PodName: me.PodName, Addrs: addrs}, node: me.NodeName}
}

// describe says what the verdict reads of a trimmed endpoint: how it
// relates to me, its conditions (nil, true or false) and its node.
func describe(m judge.Matcher, ep discovery.Endpoint) string {
	b := func(p *bool) string {
		if p == nil {
			return "nil"
		}
		return fmt.Sprint(*p)
	}
	kind := map[judge.EndpointKind]string{judge.ThisPod: "judge.ThisPod", judge.OtherPod: "judge.OtherPod", judge.SameAddress: "judge.SameAddress"}[m.Kind(ep)]
	node := "-"
	if ep.NodeName != nil {
		node = *ep.NodeName
	}
	c := ep.Conditions
	return fmt.Sprintf("%s ready=%s serving=%s terminating=%s node=%s", kind, b(c.Ready), b(c.Serving), b(c.Terminating), node)
}

func TestTrimSliceEndpoints(t *testing.T) {
	aware := meTrimmer(t)
	const (
		mineST   = "judge.ThisPod ready=false serving=true terminating=true node=n1"
		mineR    = "judge.ThisPod ready=true serving=true terminating=false node=n1"
		peerR2   = "judge.OtherPod ready=true serving=true terminating=false node=n2"
		peerR1   = "judge.OtherPod ready=true serving=true terminating=false node=n1"
		peerST2  = "judge.OtherPod ready=false serving=true terminating=true node=n2"
		hostnetR = "judge.SameAddress ready=true serving=true terminating=false node=n1"
	)
	tests := []struct {
		name string
		eps  []discovery.Endpoint
		// what the observer of me keeps, and one that does not know the pod
		aware, blind []string
	}{
		{"this pod's endpoint keeps what judge.Matcher.kind needs",
			[]discovery.Endpoint{mine(servingTermC)}, []string{mineST}, []string{mineST}},
		{"an endpoint without targetRef at this pod's address is this pod",
			[]discovery.Endpoint{ep("10.0.0.5", "n1", "", readyC)}, []string{mineR}, []string{mineR}},
		{"this pod's address in its IPv4-mapped IPv6 spelling",
			[]discovery.Endpoint{ep("::ffff:10.0.0.5", "n1", "web-0", readyC)}, []string{mineR}, []string{mineR}},
		{"another pod at this pod's address is neither: the observer of me drops it",
			[]discovery.Endpoint{ep("10.0.0.5", "n1", "hostnet-1", readyC)}, nil, []string{hostnetR}},
		{"a ready peer keeps its conditions and node",
			[]discovery.Endpoint{peer("n2", readyC)}, []string{peerR2}, []string{peerR2}},
		{"a peer that is not ready counts for nothing in judgeFamily",
			[]discovery.Endpoint{peer("n2", servingTermC)}, nil, []string{peerST2}},
		{"ready peers: one elsewhere and one on this node answer judgeFamily",
			[]discovery.Endpoint{
				peer("n2", readyC), ep("10.0.2.2", "n3", "web-2", readyC),
				ep("10.0.3.3", "n1", "web-3", readyC), ep("10.0.4.4", "n1", "web-4", readyC),
			},
			[]string{peerR2, peerR1},
			[]string{peerR2, "judge.OtherPod ready=true serving=true terminating=false node=n3", peerR1, peerR1}},
		{"nil conditions and node stay nil: kube-proxy reads nil ready as ready",
			[]discovery.Endpoint{{Addresses: []string{"10.0.1.7"}}},
			[]string{"judge.OtherPod ready=nil serving=nil terminating=nil node=-"},
			[]string{"judge.OtherPod ready=nil serving=nil terminating=nil node=-"}},
		{"this pod among peers",
			[]discovery.Endpoint{peer("n2", readyC), mine(servingTermC), peer("n2", readyC)},
			[]string{peerR2, mineST}, []string{peerR2, mineST, peerR2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw := v4("web-a", "web", tt.eps...)
			for _, c := range []struct {
				who  string
				tr   trimmer
				want []string
			}{{"observer of me", aware, tt.aware}, {"pod not known", trimmer{}, tt.blind}} {
				got := c.tr.slice(raw)
				var says []string
				for _, e := range got.Endpoints {
					says = append(says, describe(aware.match, e))
				}
				if strings.Join(says, "\n") != strings.Join(c.want, "\n") {
					t.Errorf("%s keeps\n  %s\nwant\n  %s", c.who, strings.Join(says, "\n  "), strings.Join(c.want, "\n  "))
				}
				if again := c.tr.slice(got); !reflect.DeepEqual(again, got) {
					t.Errorf("%s: trimming twice changed the slice:\n%+v\n%+v", c.who, got, again)
				}
			}
		})
	}
}

func TestTrimSliceKeeps(t *testing.T) {
	aware := meTrimmer(t)
	raw := v4("web-a", "web", mine(readyC), peer("n2", readyC))
	raw.UID, raw.ResourceVersion = "0c6d-uid", "42"
	raw.Labels[discovery.LabelManagedBy] = "endpointslice-controller.k8s.io"
	raw.Ports = []discovery.EndpointPort{{Name: new("http")}}
	got := aware.slice(raw)

	if got.Name != "web-a" || got.Namespace != "default" || got.ResourceVersion != "42" {
		t.Errorf("meta = %+v, want name, namespace and resource version kept", got.ObjectMeta)
	}
	if !reflect.DeepEqual(got.Labels, map[string]string{judge.LabelServiceName: "web"}) {
		t.Errorf("labels = %v, want the service name alone", got.Labels)
	}
	if got.UID != "" || got.Ports != nil || got.AddressType != discovery.AddressTypeIPv4 {
		t.Errorf("uid %q, ports %v, address type %q: want no uid or ports, the address type kept", got.UID, got.Ports, got.AddressType)
	}
	mineKept := got.Endpoints[0]
	if !reflect.DeepEqual(mineKept.Addresses, []string{"10.0.0.5"}) ||
		*mineKept.TargetRef != (corev1.ObjectReference{Kind: "Pod", Name: "web-0"}) {
		t.Errorf("this pod's endpoint = %+v (targetRef %+v), want its addresses and targetRef kind and name", mineKept, mineKept.TargetRef)
	}
	if peerKept := got.Endpoints[1]; peerKept.Addresses != nil || peerKept.TargetRef != nil {
		t.Errorf("peer = %+v: want no addresses nor targetRef", peerKept)
	}

	// What repeats is shared: the labels of a Service's slices, condition
	// values, node names.
	other := aware.slice(v4("web-b", "web", peer("n2", readyC)))
	if reflect.ValueOf(got.Labels).UnsafePointer() != reflect.ValueOf(other.Labels).UnsafePointer() {
		t.Error("two slices of one Service do not share their labels")
	}
	a, b := got.Endpoints[1], other.Endpoints[0]
	if a.Conditions.Ready != b.Conditions.Ready || a.NodeName != b.NodeName {
		t.Error("two ready peers on n2 do not share their ready condition and node name")
	}
}

func TestTrimIgnoredSlice(t *testing.T) {
	mesh := v4("mesh-a", "mesh", mine(readyC), peer("n2", readyC))
	mesh.Labels[judge.LabelProxyName] = "istio"
	fqdn := slice("ext-a", "ext", discovery.AddressTypeFQDN, ep("example.com", "n1", "", readyC))
	for _, s := range []*discovery.EndpointSlice{mesh, fqdn} {
		got := meTrimmer(t).slice(s)
		// Of a slice kube-proxy does not program only this pod's endpoint
		// is kept: it says the pod has a path kube-proxy does not carry.
		want := 0
		if s == mesh {
			want = 1
		}
		if judge.ProxiedSlice(got) || len(got.Endpoints) != want || got.Labels["app"] != "" {
			t.Errorf("%s: %+v: want not proxied, %d endpoints, other labels dropped", s.Name, got, want)
		}
	}
	if got := trimSlice(mesh); got.Labels[judge.LabelProxyName] != "istio" || got.Labels[judge.LabelServiceName] != "mesh" {
		t.Errorf("labels = %v, want the proxy name kept", got.Labels)
	}
}

// The trimmed slices give the verdicts the slices give, for random slices of
// this pod, other pods and pods at this pod's address, under every traffic
// policy. It fails when judge.Service starts reading what trim drops.
func TestTrimKeepsVerdicts(t *testing.T) {
	aware := meTrimmer(t)
	rnd := rand.New(rand.NewPCG(1, 2))
	pick := func(n int) int { return rnd.IntN(n) }
	bools := []*bool{nil, new(true), new(false)}
	addrs := []string{"10.0.0.5", "::ffff:10.0.0.5", "fd00::5", "10.0.1.7", "fd00::1:7", "not-an-ip"}
	refs := []*corev1.ObjectReference{nil, {Kind: "Pod", Name: "web-0"}, {Kind: "Pod", Name: "web-1"},
		{Kind: "Pod", Name: "hostnet-1"}, {Kind: "Node", Name: "web-0"}}
	nodes := []*string{nil, new("n1"), new("n2")}
	services := []*corev1.Service{nil, service("web"), service("web", loadBalancerLocal), service("web", internalLocal),
		service("web", func(s *corev1.Service) { s.Spec.PublishNotReadyAddresses = true })}
	port := func(name string, proto corev1.Protocol, n int32) discovery.EndpointPort {
		return discovery.EndpointPort{Name: &name, Protocol: &proto, Port: &n}
	}
	noName := discovery.EndpointPort{Port: new(int32(80))}
	portSets := [][]discovery.EndpointPort{nil,
		{port("http", corev1.ProtocolTCP, 80)},
		{port("http", corev1.ProtocolTCP, 8080)}, // the same Service port, another target
		{port("http", corev1.ProtocolTCP, 80), port("admin", corev1.ProtocolTCP, 9000)},
		{port("admin", corev1.ProtocolTCP, 9000)},
		{port("http", corev1.ProtocolUDP, 80)},
		{port("http", corev1.ProtocolTCP, 0), noName}, // none kube-proxy reads
	}
	endpoint := func() discovery.Endpoint {
		e := discovery.Endpoint{
			Conditions: discovery.EndpointConditions{Ready: bools[pick(3)], Serving: bools[pick(3)], Terminating: bools[pick(3)]},
			TargetRef:  refs[pick(len(refs))],
			NodeName:   nodes[pick(len(nodes))],
		}
		for range 1 + pick(2) {
			e.Addresses = append(e.Addresses, addrs[pick(len(addrs))])
		}
		return e
	}
	for i := range 20000 {
		var raw []*discovery.EndpointSlice
		for j := range 1 + pick(3) {
			fam := []discovery.AddressType{discovery.AddressTypeIPv4, discovery.AddressTypeIPv6}[pick(2)]
			var eps []discovery.Endpoint
			for range pick(5) {
				eps = append(eps, endpoint())
			}
			sl := slice(fmt.Sprint("web-", j), "web", fam, eps...)
			sl.Ports = portSets[pick(len(portSets))]
			raw = append(raw, sl)
		}
		svc := services[pick(len(services))]
		want := judge.Service(svc, raw, aware.match, me.NodeName)
		for _, c := range []struct {
			who string
			tr  trimmer
		}{{"observer of me", aware}, {"pod not known", trimmer{}}} {
			trimmed := make([]*discovery.EndpointSlice, len(raw))
			for j, s := range raw {
				v, err := c.tr.transform(s) // stored as the informer stores it
				if err != nil {
					t.Fatal(err)
				}
				trimmed[j] = v.(*storedSlice).slice() // expanded as the verdict reads it
			}
			if got := judge.Service(svc, trimmed, aware.match, me.NodeName); !reflect.DeepEqual(got, want) {
				t.Fatalf("case %d, %s: trimmed verdicts %+v, want %+v\nslices: %s", i, c.who, got, want, dump(aware.match, raw))
			}
		}
	}
}

// dump shows slices as m classifies their endpoints.
func dump(m judge.Matcher, slices []*discovery.EndpointSlice) string {
	var b strings.Builder
	for _, s := range slices {
		fmt.Fprintf(&b, "\n%s %s:", s.Name, s.AddressType)
		for _, e := range s.Endpoints {
			fmt.Fprintf(&b, "\n  %v ref=%+v %s", e.Addresses, e.TargetRef, describe(m, e))
		}
	}
	return b.String()
}

// The observer's transform knows its pod; the package's does not. Both trim
// Services and the pod and leave other objects alone; slices are stored as
// storedSlice, keyed as client-go keys the EndpointSlice.
func TestTrimTransforms(t *testing.T) {
	o := newTestObserver(t, Config{Mode: ModeEndpointSlices}, nil)
	raw := v4("web-a", "web", mine(readyC), peer("n2", readyC), peer("n2", readyC))
	for _, c := range []struct {
		who       string
		transform func(any) (any, error)
		endpoints int
	}{{"observer", o.transform, 2}, {"package", transformKnowingNoPod, 3}} {
		got, err := c.transform(raw)
		if s, ok := got.(*storedSlice); err != nil || !ok || len(s.endpoints) != c.endpoints || s.name != "web-a" || s.service() != "web" {
			t.Errorf("%s: slice = %+v, %v: want web-a of Service web stored with %d endpoints", c.who, got, err, c.endpoints)
		}
		if key, err := cache.MetaNamespaceKeyFunc(got); err != nil || key != "default/web-a" {
			t.Errorf("%s: store key of the stored slice %q, %v; want default/web-a", c.who, key, err)
		}
		// The streamed initial list is transformed twice: the second time
		// changes nothing.
		if again, err := c.transform(got); err != nil || again != got {
			t.Errorf("%s: transform of a stored slice = %+v, %v: want it unchanged", c.who, again, err)
		}
		svc := service("web", internalLocal)
		svc.Annotations = map[string]string{"big": "annotation"}
		got, err = c.transform(svc)
		if s, ok := got.(*corev1.Service); err != nil || !ok || s.Annotations != nil || *s.Spec.InternalTrafficPolicy != corev1.ServiceInternalTrafficPolicyLocal {
			t.Errorf("%s: Service = %+v, %v: want annotations dropped, traffic policy kept", c.who, got, err)
		}
		g := int64(30)
		pod := &corev1.Pod{Spec: corev1.PodSpec{NodeName: "n1"}}
		pod.Name, pod.DeletionGracePeriodSeconds = "web-0", &g
		got, err = c.transform(pod)
		if p, ok := got.(*corev1.Pod); err != nil || !ok || p.Spec.NodeName != "" || *p.DeletionGracePeriodSeconds != 30 {
			t.Errorf("%s: pod = %+v, %v: want the grace period alone", c.who, got, err)
		}
		if got, err := c.transform("other"); got != "other" || err != nil {
			t.Errorf("%s: other object = %v, %v", c.who, got, err)
		}
	}
}
