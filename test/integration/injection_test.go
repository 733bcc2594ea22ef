package integration

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestInjection_LBCheckBindRefused: a HAPSUPER_LB_CHECK_BIND that carries
// lines of HAProxy configuration (a `global` section with an admin stats
// socket anyone may use, then a frontend so that the rest of the health
// check still parses; tabs, since a space was always refused) ends hapsuper
// with exit code 2 and an error naming the variable, before HAProxy starts:
// no override file is written and no admin socket appears.
func TestInjection_LBCheckBindRefused(t *testing.T) {
	eachHAProxy(t, func(t *testing.T, h haproxyVersion) {
		for _, tc := range []struct{ name, sep string }{{"LF", "\n"}, {"CRLF", "\r\n"}} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				dir := t.TempDir()
				admin := filepath.Join(dir, "admin.sock")
				bind := strings.Join([]string{
					filepath.Join(dir, "lb.sock"),
					"global",
					"\tstats\tsocket\t" + admin + "\tmode\t666\tlevel\tadmin",
					"frontend\tinjected",
					"\tbind\t127.0.0.1:" + strconv.Itoa(freePort(t)),
				}, tc.sep)
				cfg := newConfig(t)
				args := supervisorArgs(dir, fast.flags(), h.command(t, dir), "-f", cfg.write(t, dir))
				s := startCommand(t, dir, procOptions{env: []string{"HAPSUPER_LB_CHECK_BIND=" + bind, "HAPSUPER_LB_CHECK_THRESHOLD=2"}}, args)

				select {
				case <-s.Done():
				case <-time.After(10 * time.Second):
					_, err := os.Lstat(admin)
					t.Fatalf("hapsuper still running 10s after its start, the injected admin socket %s present: %v", admin, err == nil)
				}
				code, exitAt := s.waitExit(time.Second)
				out := s.String()
				t.Logf("exit %d after %s; output:\n%s", code, exitAt.Sub(s.started), out)
				if code != 2 {
					t.Errorf("exit code %d, want 2 (a settings error)", code)
				}
				if !strings.Contains(out, "HAPSUPER_LB_CHECK_BIND=") || !strings.Contains(out, "is not an address to bind") {
					t.Errorf("the error does not name HAPSUPER_LB_CHECK_BIND as not an address to bind")
				}
				if _, ok := s.Find("haproxy ready", nil); ok {
					t.Error("HAProxy was started with the injected configuration")
				}
				for _, path := range []string{admin, filepath.Join(dir, "override.cfg")} {
					if _, err := os.Lstat(path); err == nil {
						t.Errorf("%s exists: the injected value reached HAProxy's configuration", path)
					}
				}
				checkNoHAProxyLeft(t, dir)
			})
		}
	})
}
