package supervisor

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hapsuper/hapsuper/status"
)

// haproxy-ingress starts HAProxy on a configuration without frontends and
// writes its own later: the warnings of the configuration a reload loaded
// are logged then, once per change of what they say.
func TestReinspect_WarnsAfterReload(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "haproxy.cfg")
	write := func(text string) {
		t.Helper()
		if err := os.WriteFile(cfg, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var out bytes.Buffer
	s := testSettings
	s.HAProxy = []string{"haproxy", "-W", "-f", cfg}
	l := &loop{log: slog.New(slog.NewTextHandler(&out, nil)), settings: s, reloads: newReloads()}
	count := func() int { return strings.Count(out.String(), "config warning") }
	reloaded := func() { l.logReload(status.Reload{Result: status.ReloadOK, Origin: "master CLI"}) }

	const front = "frontend _front_http\n    mode http\n    bind :80\n"
	write("defaults\n    timeout client 1s\n") // the controller's --init configuration
	reloaded()
	if n := count(); n != 0 {
		t.Fatalf("no frontend, %d warnings:\n%s", n, &out)
	}
	write("defaults\n    mode http\n    timeout client 10s\n" + front)
	reloaded()
	if n := count(); n != 2 || !strings.Contains(out.String(), "idle-close-on-response") || !strings.Contains(out.String(), "client-fin") || !strings.Contains(out.String(), "after=reload") {
		t.Fatalf("after the reload to a frontend without idle-close-on-response and client-fin: %d warnings, want both:\n%s", n, &out)
	}
	reloaded()
	if n := count(); n != 2 {
		t.Errorf("the same configuration again: %d warnings in all, want the 2 already logged", n)
	}
	write("defaults\n    mode http\n    timeout client 10s\n    timeout client-fin 5s\n    option idle-close-on-response\n" + front)
	reloaded()
	write("defaults\n    mode http\n    timeout client 10s\n    timeout client-fin 5s\n" + front)
	reloaded()
	if n := count(); n != 3 {
		t.Errorf("fixed, then idle-close-on-response dropped again: %d warnings in all, want 3:\n%s", n, &out)
	}
	os.Remove(cfg)
	reloaded()
	if !strings.Contains(out.String(), "configuration after the reload not inspected") {
		t.Errorf("a configuration that cannot be read is not reported:\n%s", &out)
	}
}
