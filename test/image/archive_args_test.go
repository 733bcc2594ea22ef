package image_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestBuiltImageFlagsOnly runs the built image with arguments that are
// HAProxy's flags only, as the official image's docker-entrypoint.sh
// accepts them (a first argument starting with "-" gets "haproxy" put
// before it) and as haproxy-ingress passes them: the container's args
// replace the image's CMD after its ENTRYPOINT, hapsuper must run
// `haproxy <args>` with its own additions, serve, drain on the image's
// STOPSIGNAL and exit 0.
func TestBuiltImageFlagsOnly(t *testing.T) {
	tests := []struct {
		name string
		// args are the container's arguments; files maps the paths the
		// test writes inside the image to what they hold ("cfg" for the
		// example configuration, "dir" for a directory the image's user
		// owns).
		args  []string
		files map[string]string
		sock  string // the master socket hapsuper must use: the one of -S
	}{
		{
			// haproxy-ingress: -W, its own master socket, a directory of
			// configuration files.
			name:  "haproxy-ingress",
			args:  []string{"-W", "-S", "/var/run/haproxy-test/master.sock,mode,600", "-f", "/etc/haproxy-test"},
			files: map[string]string{"/run/haproxy-test": "dir", "/etc/haproxy-test/haproxy.cfg": "cfg"},
			sock:  "/var/run/haproxy-test/master.sock",
		},
		{
			// `docker run IMAGE -f /my.cfg`
			name:  "-f file",
			args:  []string{"-f", "/my.cfg"},
			files: map[string]string{"/my.cfg": "cfg"},
			sock:  "/var/run/hapsuper/master.sock",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			img, root, uid, gid := unpackImage(t)
			c := img.Config
			port := 0
			for path, what := range tt.files {
				// Write below root itself: a path through the root's
				// /var/run, an absolute link to /run, would leave it.
				p := filepath.Join(root, path)
				switch what {
				case "dir":
					if err := os.MkdirAll(p, 0o700); err != nil {
						t.Fatal(err)
					}
					if err := os.Chown(p, uid, gid); err != nil {
						t.Fatal(err)
					}
				case "cfg":
					if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
						t.Fatal(err)
					}
					port = writeExampleConfig(t, p)
				}
			}
			argv := slices.Concat(c.Entrypoint, tt.args)
			env := slices.Concat(c.Env, drainEnv)
			t.Logf("running %q chrooted into the image (%s), as %s (%d:%d) in %s", argv, root, c.User, uid, gid, c.WorkingDir)
			p := startIn(t, root, c.WorkingDir, argv, env, uid, gid)

			started := p.waitLog(t, "haproxy started", 10*time.Second)
			var got []string
			for _, a := range started["argv"].([]any) {
				got = append(got, a.(string))
			}
			if len(got) < 1+len(tt.args) || filepath.Base(got[0]) != "haproxy" || !slices.Equal(withoutWs(got[1:1+len(tt.args)]), withoutWs(tt.args)) {
				t.Errorf("HAProxy's argv %q: want the image's haproxy, then the container's arguments %q (-W may become -Ws)", got, tt.args)
			}
			if i := slices.Index(got, "-S"); i < 0 || !strings.HasPrefix(got[i+1], tt.sock+",") || strings.Count(strings.Join(got, " "), " -S ") != 1 {
				t.Errorf("HAProxy's argv %q: want one -S, on %s", got, tt.sock)
			}
			master := p.ready(t, uid)
			checkImageMaster(t, root, master)
			p.serveAndDrain(t, port, c.StopSignal)
		})
	}
}

// withoutWs is args with -Ws read as -W: hapsuper turns a user's -W into
// -Ws when HAProxy can notify.
func withoutWs(args []string) []string {
	out := slices.Clone(args)
	for i, a := range out {
		if a == "-Ws" {
			out[i] = "-W"
		}
	}
	return out
}
