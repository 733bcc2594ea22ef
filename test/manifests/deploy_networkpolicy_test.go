package manifests_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/hapsuper/hapsuper/conf"
	"github.com/hapsuper/hapsuper/test/harness/kube"
)

// components/network-policy selects the haproxy pods, lets in their
// container ports, and lets out only what hapsuper and the example
// configuration need: DNS, the apiserver, every node's kube-proxy healthz,
// the NodePort range (the node's health check node port) and the example
// backend's port.
func TestDeploy_NetworkPolicy(t *testing.T) {
	r := kube.RenderIn(t, "overlays/kube-proxy", "shop", "components:\n  - {{deploy}}/components/network-policy\n")
	d, c := deployment(t, r)
	nps := r.Find("NetworkPolicy")
	if len(nps) != 1 {
		t.Fatalf("rendered %v: want one NetworkPolicy", r.Kinds())
	}
	var np networkingv1.NetworkPolicy
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(nps[0].Object, &np, true); err != nil {
		t.Fatalf("decode NetworkPolicy: %v", err)
	}
	if np.Namespace != "shop" {
		t.Errorf("NetworkPolicy in namespace %q, want the overlay's shop", np.Namespace)
	}
	sel, err := metav1LabelSelector(np)
	if err != nil || !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
		t.Fatalf("podSelector %v does not select the pod template's labels %v (%v)", np.Spec.PodSelector, d.Spec.Template.Labels, err)
	}
	allows := func(rules []networkingv1.NetworkPolicyPort, proto corev1.Protocol, port int32) bool {
		for _, p := range rules {
			pp := corev1.ProtocolTCP
			if p.Protocol != nil {
				pp = *p.Protocol
			}
			if pp != proto || p.Port == nil {
				continue
			}
			lo, hi := p.Port.IntVal, p.Port.IntVal
			if p.EndPort != nil {
				hi = *p.EndPort
			}
			if port >= lo && port <= hi {
				return true
			}
		}
		return false
	}
	var in, out []networkingv1.NetworkPolicyPort
	for _, rule := range np.Spec.Ingress {
		in = append(in, rule.Ports...)
	}
	for _, rule := range np.Spec.Egress {
		if len(rule.To) > 0 {
			t.Errorf("egress rule %+v names addresses: the component cannot know the cluster's", rule)
		}
		out = append(out, rule.Ports...)
	}
	for _, p := range c.Ports {
		if !allows(in, corev1.ProtocolTCP, p.ContainerPort) {
			t.Errorf("ingress does not allow container port %s %d", p.Name, p.ContainerPort)
		}
	}
	need := map[string]int32{"DNS": 53, "apiserver 443": 443, "apiserver 6443": 6443,
		"kube-proxy healthz": conf.DefaultKubeProxyHealthzPort, "NodePort range start": 30000, "NodePort range end": 32767}
	cfg, err := os.ReadFile(filepath.Join(kube.DeployDir(t), "base", "haproxy.cfg"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`(?m)^\s*server(?:-template)?\s.*:(\d+)\b`).FindAllStringSubmatch(string(cfg), -1) {
		port, _ := strconv.Atoi(m[1])
		need["the example backend "+m[1]] = int32(port)
	}
	for what, port := range need {
		if !allows(out, corev1.ProtocolTCP, port) {
			t.Errorf("egress does not allow %s (TCP %d)", what, port)
		}
	}
	if !allows(out, corev1.ProtocolUDP, 53) {
		t.Error("egress does not allow DNS over UDP")
	}
	if allows(out, corev1.ProtocolTCP, 22) || allows(out, corev1.ProtocolTCP, 2379) || allows(out, corev1.ProtocolTCP, 10250) {
		t.Error("egress allows ssh, etcd or the kubelet: more than hapsuper and the example need")
	}
}

func metav1LabelSelector(np networkingv1.NetworkPolicy) (labels.Selector, error) {
	return metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
}
