package conf

import (
	"os/exec"
	"strings"
	"testing"
)

// The settings start no process and hold nothing of HAProxy but the -S of
// its command, read with haproxy/cmdline: running HAProxy, its
// configuration and the override file are haproxy/'s (the package doc).
func TestSettingsImportNoProcessNorHAProxy(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v: %s", err, out)
	}
	allowed := map[string]bool{
		"github.com/hapsuper/hapsuper/conf":            true,
		"github.com/hapsuper/hapsuper/haproxy/cmdline": true,
	}
	for dep := range strings.FieldsSeq(string(out)) {
		switch {
		case dep == "os/exec":
			t.Errorf("conf depends on os/exec: it must start no process (haproxy.RunHAProxy runs HAProxy)")
		case strings.HasPrefix(dep, "github.com/hapsuper/hapsuper/") && !allowed[dep]:
			t.Errorf("conf depends on %s: it must import no other package of hapsuper than haproxy/cmdline", dep)
		case strings.HasPrefix(dep, "github.com/haproxytech/"):
			t.Errorf("conf depends on %s: reading HAProxy's configuration is haproxy/'s", dep)
		}
	}
	if !strings.Contains(string(out), "github.com/hapsuper/hapsuper/conf") {
		t.Errorf("go list -deps . does not list conf itself: is this conf's directory? it said: %.200s", out)
	}
}
