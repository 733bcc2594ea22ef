package image_test

import (
	"archive/tar"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hapsuper/hapsuper/conf"
)

// dropInArchive is the archive hack/image-haproxytech.sh writes for a
// drop-in: its Dockerfile built on its stand-in for the controller's image.
func dropInArchive(di dropIn) string { return filepath.Base(filepath.Dir(di.path)) + ".oci.tar" }

// loadDropInArchive reads a drop-in image's archive as loadArchive reads
// image.sh's, or skips the test when it is missing (fails it when
// CI=true), saying how to make it.
func loadDropInArchive(t *testing.T, di dropIn) ociImage {
	t.Helper()
	dir := os.Getenv(archiveEnv)
	if dir == "" {
		dir = archiveDefault
	}
	p := filepath.Join(dir, dropInArchive(di))
	if _, err := os.Stat(p); err != nil {
		msg := "no built drop-in image at " + p + " (" + err.Error() + "): build it with `sh hack/image.sh && sh hack/image-haproxytech.sh` (root)"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return readArchive(t, p)
}

// Each built drop-in image keeps the Dockerfile's ENTRYPOINT, CMD,
// STOPSIGNAL, USER and HAPSUPER_* settings over the base's, holds the
// stand-in's layout (wrapper, controller, configuration, /etc/gopherd),
// gopherd as a link to hapsuper and hapsuper's run directory, 0700, owned
// by haproxy.
func TestBuiltHAProxyTechImages(t *testing.T) {
	for _, di := range dropIns {
		t.Run(filepath.Base(filepath.Dir(di.path)), func(t *testing.T) {
			checkBuiltDropIn(t, di)
		})
	}
}

func checkBuiltDropIn(t *testing.T, di dropIn) {
	img := loadDropInArchive(t, di)
	df := loadDropIn(t, di.path)
	c := img.Config
	if !slices.Equal(c.Entrypoint, df.entrypoint) || len(c.Cmd) != 0 {
		t.Errorf("image entrypoint %q cmd %q: want the Dockerfile's %q and no CMD", c.Entrypoint, c.Cmd, df.entrypoint)
	}
	if c.StopSignal != df.stopSignal || c.User != df.user {
		t.Errorf("image stop signal %q user %q, want the Dockerfile's %q and %q", c.StopSignal, c.User, df.stopSignal, df.user)
	}
	for k, v := range df.env {
		if !slices.Contains(c.Env, k+"="+v) {
			t.Errorf("image env lacks %s=%s: %q", k, v, c.Env)
		}
	}

	entries := map[string]*tar.Header{}
	var passwd []byte
	forEachEntry(t, img, func(h *tar.Header, tr *tar.Reader) (err error) {
		name := strings.TrimPrefix(path.Clean(h.Name), "/")
		entries[name] = h
		if name == "etc/passwd" {
			passwd, err = io.ReadAll(tr)
		}
		return err
	})
	for _, f := range append([]string{di.wrapper, "/usr/local/sbin/haproxy", di.controller, "/etc/gopherd/gopherd.yml"}, di.configs...) {
		if f != di.createdAux && entries[strings.TrimPrefix(f, "/")] == nil {
			t.Errorf("the stand-in layout lacks %s", f)
		}
	}
	link := entries[strings.TrimPrefix(filepath.Join(di.gopherdDir, "gopherd"), "/")]
	if link == nil || link.Typeflag != tar.TypeSymlink || link.Linkname != binaryPath {
		t.Errorf("gopherd in the image: %+v, want a link to %s", link, binaryPath)
	}
	uid, gid := passwdIDs(passwd, "haproxy")
	runDirName := strings.TrimPrefix(runDir(t), "/")
	dir := entries[runDirName]
	if l := entries["var/run"]; dir == nil && l != nil && l.Typeflag == tar.TypeSymlink {
		dir = entries[path.Join(strings.TrimPrefix(l.Linkname, "/"), path.Base(runDirName))]
	}
	if dir == nil || dir.Typeflag != tar.TypeDir || dir.Mode&0o777 != 0o700 || dir.Uid != uid || dir.Gid != gid {
		t.Errorf("run directory /%s: %+v, want a directory 0700 owned by haproxy (%d:%d)", runDirName, dir, uid, gid)
	}
	if _, err := conf.Parse(nil, func(k string) (string, bool) {
		for _, kv := range c.Env {
			if name, v, _ := strings.Cut(kv, "="); name == k && k != conf.EnvName("haproxy-command") && k != conf.EnvName("companion") {
				return v, true
			}
		}
		return "", false
	}); err != nil {
		t.Errorf("hapsuper refuses the image's settings: %v", err)
	}
}
