package main

import (
	"os/exec"
	"strings"
	"testing"
)

// allowedAPIGroups are the Kubernetes API groups the binary may link:
// routing/kube's scheme. Every other group, and client-go's generated
// clientset with its scheme of every group, cost RSS for the pod's life
// (routing/kube's package doc).
var allowedAPIGroups = map[string]bool{
	"k8s.io/api/core/v1":          true,
	"k8s.io/api/discovery/v1":     true,
	"k8s.io/api/events/v1":        true,
	"k8s.io/api/authorization/v1": true,
}

// forbiddenPackages cost RSS for the pod's life: client-go's clientset and
// its kin link every API group of Kubernetes at init; client_golang's
// registry and protobuf model kept 1.4–2.1 MB more resident than metrics/'s own
// exposition.
var forbiddenPackages = map[string]string{
	"k8s.io/client-go/kubernetes":                    "talk to the apiserver through routing/kube",
	"k8s.io/client-go/kubernetes/scheme":             "talk to the apiserver through routing/kube",
	"k8s.io/client-go/informers":                     "talk to the apiserver through routing/kube",
	"k8s.io/client-go/discovery":                     "talk to the apiserver through routing/kube",
	"github.com/prometheus/client_golang/prometheus": "metrics/ writes the exposition itself",
	"google.golang.org/protobuf/proto":               "nothing in the binary needs protobuf's runtime",
}

func TestBinaryLinksLeanKubernetesClient(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v: %s", err, out)
	}
	deps := map[string]bool{}
	for dep := range strings.FieldsSeq(string(out)) {
		deps[dep] = true
		if strings.HasPrefix(dep, "k8s.io/api/") && !allowedAPIGroups[dep] {
			t.Errorf("hapsuper links API group %s: only routing/kube's groups are allowed (add it there and to allowedAPIGroups if it is needed)", dep)
		}
	}
	for p, why := range forbiddenPackages {
		if deps[p] {
			t.Errorf("hapsuper links %s: %s", p, why)
		}
	}
	if !deps["k8s.io/api/core/v1"] {
		t.Errorf("hapsuper does not link k8s.io/api/core/v1: is this the binary's package? go list said: %.200s", out)
	}
}
