package supervisor

import (
	"os/exec"
	"strings"
	"testing"
)

// The PID 1 package links no Kubernetes client: routing/ is the one
// boundary with the apiserver, and the supervisor knows it by Routing.
func TestNoKubernetesDependency(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v: %s", err, out)
	}
	for dep := range strings.FieldsSeq(string(out)) {
		if strings.HasPrefix(dep, "k8s.io/") || strings.HasPrefix(dep, "sigs.k8s.io/") {
			t.Errorf("supervisor depends on %s: the Kubernetes API belongs behind routing/", dep)
		}
	}
}
