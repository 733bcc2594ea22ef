package image_test

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// sidecarArchiveName is the archive of the Dockerfile's sidecar target
// that hack/image.sh writes beside the main one.
const sidecarArchiveName = "hapsuper-sidecar.oci.tar"

// TestBuiltSidecarImage: the image of the sidecar target, read back from
// its archive, runs `hapsuper sidecar` as uid and gid 99 with the default
// stop signal, and holds hapsuper alone, static and executable, which
// answers `version` and knows the sidecar command.
func TestBuiltSidecarImage(t *testing.T) {
	p := filepath.Join(filepath.Dir(archivePath(t)), sidecarArchiveName)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("the main image's archive is there but not the sidecar's: %v (hack/image.sh writes both)", err)
	}
	img := readArchive(t, p)
	c := img.Config
	t.Logf("%s: %s/%s, entrypoint %q, cmd %q, user %q, stop signal %q, %d layers", p, img.OS, img.Architecture, c.Entrypoint, c.Cmd, c.User, c.StopSignal, len(img.layers))
	if !slices.Equal(c.Entrypoint, []string{binaryPath, "sidecar"}) {
		t.Errorf("Entrypoint %q, want [%s sidecar]", c.Entrypoint, binaryPath)
	}
	if c.User != "99:99" {
		t.Errorf("User %q, want 99:99", c.User)
	}
	if c.StopSignal != "" && c.StopSignal != "SIGTERM" {
		t.Errorf("StopSignal %q: the sidecar stops on SIGTERM, the kubelet's default", c.StopSignal)
	}
	var files []string
	var binary []byte
	forEachEntry(t, img, func(h *tar.Header, tr *tar.Reader) (err error) {
		name := "/" + strings.TrimPrefix(path.Clean(h.Name), "/")
		if h.Typeflag != tar.TypeDir {
			files = append(files, name)
		}
		if name == binaryPath {
			if h.Mode&0o111 == 0 {
				t.Errorf("%s mode %o: not executable", name, h.Mode)
			}
			binary, err = io.ReadAll(tr)
		}
		return err
	})
	if !slices.Equal(files, []string{binaryPath}) {
		t.Errorf("files in the image %v: want hapsuper alone at %s", files, binaryPath)
	}
	if bytes.Contains(binary, []byte("/lib64/ld-linux")) || bytes.Contains(binary, []byte("/lib/ld-musl")) {
		t.Errorf("%s names a dynamic loader: want a static binary", binaryPath)
	}
	bin := filepath.Join(t.TempDir(), "hapsuper")
	if err := os.WriteFile(bin, binary, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, "version").CombinedOutput(); err != nil {
		t.Errorf("hapsuper version from the image: %v: %s", err, out)
	}
	if out, err := exec.Command(bin, "help", "sidecar").CombinedOutput(); err != nil || !strings.Contains(string(out), "usage: hapsuper sidecar") {
		t.Errorf("hapsuper help sidecar from the image: %v: %s", err, out)
	}
}
