package supervisor

import (
	"slices"
	"testing"

	"github.com/hapsuper/hapsuper/conf"
)

// The companion learns the status socket however it was given: added
// when the environment has none, replacing one that names another path.
func TestShimEnv(t *testing.T) {
	s := conf.Settings{StatusSocket: "/run/x/status.sock"}
	want := "HAPSUPER_STATUS_SOCKET=/run/x/status.sock"
	for _, env := range [][]string{
		{"PATH=/usr/bin"},
		{"PATH=/usr/bin", "HAPSUPER_STATUS_SOCKET=/var/run/hapsuper/status.sock"},
	} {
		got := shimEnv(slices.Clone(env), s)
		n := 0
		for _, kv := range got {
			if len(kv) > len(conf.StatusSocketEnv) && kv[:len(conf.StatusSocketEnv)+1] == conf.StatusSocketEnv+"=" {
				n++
				if kv != want {
					t.Errorf("shimEnv(%q) sets %q, want %q", env, kv, want)
				}
			}
		}
		if n != 1 || !slices.Contains(got, "PATH=/usr/bin") {
			t.Errorf("shimEnv(%q) = %q: want PATH kept and one %s", env, got, conf.StatusSocketEnv)
		}
	}
}
