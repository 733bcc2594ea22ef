package routing

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/hapsuper/hapsuper/conf"
)

// An explicit --kubeconfig that cannot be read fails at start in every
// mode that would use it, auto included (it used to turn routing off with
// "no --kubeconfig" in the log).
func TestOpenBadKubeconfigFails(t *testing.T) {
	for _, mode := range []string{conf.RoutingAuto, conf.RoutingEndpointSlices} {
		s, err := conf.Parse([]string{"--routing", mode, "--kubeconfig", "/nonexistent/kubeconfig"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		c, err := Open(s, slog.New(slog.DiscardHandler))
		if err == nil || !strings.Contains(err.Error(), "--kubeconfig /nonexistent/kubeconfig") {
			t.Errorf("--routing %s with an unreadable --kubeconfig: %v (%+v), want an error naming it", mode, err, c)
		}
	}
}
