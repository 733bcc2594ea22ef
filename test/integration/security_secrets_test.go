package integration

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSecurity_NoSecretInLogsStatusOrMetrics: hapsuper runs in routing mode
// endpointslices with a kubeconfig whose bearer token is a random secret and
// whose apiserver (a closed port of 127.0.0.1) never answers, with the pod's
// downward-API variables, HAPSUPER_* settings, an unrelated secret in the
// environment, debug logs and metrics. The unreachable apiserver does not
// stop HAProxy: the routing watch never syncs, so the drain ends
// unverified once the clients are quiet, and hapsuper exits 0. Neither
// secret appears in its output (its logs and HAProxy's), in `hapsuper
// status` (text or JSON) during the drain, or in a /metrics scrape.
func TestSecurity_NoSecretInLogsStatusOrMetrics(t *testing.T) {
	eachHAProxy(t, func(t *testing.T, h haproxyVersion) {
		b := fast
		dir := t.TempDir()
		token, envSecret := randomSecret(t), randomSecret(t)
		kubeconfig := filepath.Join(dir, "kubeconfig")
		if err := os.WriteFile(kubeconfig, []byte(kubeconfigText(freePort(t), token)), 0o600); err != nil {
			t.Fatalf("write the kubeconfig: %v", err)
		}
		metricsAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
		cfg := newConfig(t)
		env := []string{"env",
			"POD_NAME=web-0", "POD_NAMESPACE=default", "POD_IPS=127.0.0.1", "NODE_NAME=node-a",
			"HAPSUPER_GRACE_PERIOD=" + b.grace.String(), "HAPSUPER_MARGIN=" + b.margin.String(),
			"HAPSUPER_QUIET_PERIOD=" + quietPeriod.String(), "HAPSUPER_POLL_INTERVAL=" + pollInterval.String(),
			"AWS_SECRET_ACCESS_KEY=" + envSecret,
		}
		flags := []string{"--routing", "endpointslices", "--kubeconfig", kubeconfig,
			"--log-level", "debug", "--metrics-addr", metricsAddr}
		s := startCommand(t, dir, procOptions{prefix: env}, supervisorArgs(dir, flags, h.command(t, dir), "-f", cfg.write(t, dir)))
		if _, ok := s.Wait("haproxy ready", nil, 15*time.Second, nil); !ok {
			code, _ := s.waitExit(5 * time.Second)
			t.Fatalf("HAProxy did not become ready with an unreachable apiserver: hapsuper exited %d (an unreachable apiserver must not stop HAProxy from starting)", code)
		}
		waitListening(t, cfg.webAddr(), 5*time.Second)
		s.waitWorkers()

		var statusJSON, statusText, metrics string
		r := s.drain(cfg.webAddr(), syscall.SIGTERM, func(*drainRun) {
			time.Sleep(500 * time.Millisecond)
			var errs string
			var code int
			if statusJSON, errs, code = s.runStatus("--json"); code != 0 {
				t.Errorf("hapsuper status --json during the drain exited %d: %s", code, errs)
			}
			statusText, _, _ = s.runStatus()
			metrics = scrape(t, "http://"+metricsAddr+"/metrics")
			time.Sleep(time.Second)
		})
		out := s.String()
		haproxyExited, _ := s.Find("haproxy exited", nil)
		t.Logf("HAProxy exited %s after SIGTERM, hapsuper %s after HAProxy; %d lines of output, %d bytes of status JSON, %d bytes of metrics",
			haproxyExited.At.Sub(r.term), r.exitAt.Sub(haproxyExited.At), len(s.Lines()), len(statusJSON), len(metrics))

		for name, secret := range map[string]string{"the kubeconfig's token": token, "an environment secret": envSecret} {
			for where, text := range map[string]string{"hapsuper's output": out, "status --json": statusJSON,
				"status": statusText, "/metrics": metrics} {
				if i := strings.Index(text, secret); i >= 0 {
					t.Errorf("%s appears in %s: …%s…", name, where, text[max(0, i-120):i])
				}
			}
		}
		if !strings.Contains(statusJSON, `"endpointslices"`) || !strings.Contains(metrics, "hapsuper_") {
			t.Errorf("the status or the metrics scrape is not what the test should search (status %q, metrics %d bytes)",
				statusJSON, len(metrics))
		}
		if len(s.All("routing observation on")) == 0 {
			t.Error(`no "routing observation on": the secret was not where it might leak`)
		}
		r.checkReason("unverified") // the routing watch never synced
		if gap := r.ended.At.Sub(r.cont.rec.lastStart()); gap < quietPeriod-pollInterval || gap > quietPeriod+2*pollInterval+schedTolerance {
			t.Errorf("drain ended %s after the last request, want one quiet period %s", gap, quietPeriod)
		}
		if r.code != 0 {
			t.Errorf("exit code %d, want 0", r.code)
		}
		// The routing watch, still retrying the apiserver, must not hold
		// hapsuper up once HAProxy is gone.
		if d := r.exitAt.Sub(haproxyExited.At); haproxyExited.At.IsZero() || d > time.Second {
			t.Errorf("hapsuper exited %s after HAProxy (at %v): want within 1 s", d, haproxyExited.At)
		}
		r.checkInBudget(b, b.exitLimit())
	})
}

// kubeconfigText is a kubeconfig for an apiserver at 127.0.0.1:port that
// authenticates with token.
func kubeconfigText(port int, token string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: unreachable
  cluster:
    server: https://127.0.0.1:%d
    insecure-skip-tls-verify: true
users:
- name: hapsuper
  user:
    token: %s
contexts:
- name: test
  context:
    cluster: unreachable
    user: hapsuper
    namespace: default
current-context: test
`, port, token)
}

// scrape GETs url (bounded to 5 s) and returns the body; the test fails
// when it cannot.
func scrape(t *testing.T, url string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Errorf("scrape %s: %v", url, err)
		return ""
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("scrape %s: %s %v", url, resp.Status, err)
	}
	return string(body)
}
