package supervisor

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hapsuper/hapsuper/runtimeapi"
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

// A frontend the controller writes with a reload and makes graceful
// (option idle-close-on-response) counts, once routing is withdrawn, by its
// new connections only, as one start saw; the poller learns it from the
// reload's inspection, and a configuration that drops the option again
// makes its kept-alive requests count again.
func TestReinspect_GracefulFrontendsFollowTheReload(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "haproxy.cfg")
	write := func(text string) {
		t.Helper()
		if err := os.WriteFile(cfg, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s := testSettings
	s.HAProxy = []string{"haproxy", "-W", "-f", cfg}
	var out bytes.Buffer
	l := &loop{log: slog.New(slog.NewTextHandler(&out, nil)), settings: s, reloads: newReloads(), graceful: newFrontendSet(nil)}
	p := &poller{graceful: l.graceful, now: time.Now}
	reloaded := func() { l.logReload(status.Reload{Result: status.ReloadOK, Origin: "master CLI"}) }
	sample := runtimeapi.Sample{Workers: []runtimeapi.WorkerSample{{
		Process:   runtimeapi.Process{PID: 7},
		Frontends: []runtimeapi.Frontend{{Name: "_front_http", Mode: "http", Stot: 3, ReqTot: 40}},
	}}}
	connections := func() uint64 {
		t.Helper()
		o := p.observe(sample, nil)
		if o.Err != nil || len(o.Workers) != 1 {
			t.Fatalf("observe = %+v", o)
		}
		return o.Workers[0].Connections
	}
	if n := connections(); n != 43 {
		t.Fatalf("before any reload: %d connections, want 43 (stot + req_tot: not known graceful)", n)
	}
	const front = "frontend _front_http\n    mode http\n    bind :80\n"
	write("defaults\n    mode http\n    timeout client 10s\n    timeout client-fin 5s\n    option idle-close-on-response\n" + front)
	reloaded()
	if n := connections(); n != 3 {
		t.Errorf("after the reload to a graceful frontend: %d connections, want 3 (stot only)", n)
	}
	write("defaults\n    mode http\n    timeout client 10s\n    timeout client-fin 5s\n" + front)
	reloaded()
	if n := connections(); n != 43 {
		t.Errorf("after the reload that drops idle-close-on-response: %d connections, want 43", n)
	}
	os.Remove(cfg)
	reloaded()
	if n := connections(); n != 43 {
		t.Errorf("a configuration that cannot be read changed the set: %d connections, want 43", n)
	}
}
