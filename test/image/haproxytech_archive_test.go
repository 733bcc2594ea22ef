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

// haproxytechArchiveName is the archive hack/image-haproxytech.sh writes:
// deploy/haproxytech-ingress/Dockerfile built on its stand-in for the
// controller's image.
const haproxytechArchiveName = "haproxytech-ingress.oci.tar"

// loadHAProxyTechArchive reads the haproxytech image's archive as
// loadArchive reads image.sh's, or skips the test when it is missing
// (fails it when CI=true), saying how to make it.
func loadHAProxyTechArchive(t *testing.T) ociImage {
	t.Helper()
	dir := os.Getenv(archiveEnv)
	if dir == "" {
		dir = archiveDefault
	}
	p := filepath.Join(dir, haproxytechArchiveName)
	if _, err := os.Stat(p); err != nil {
		msg := "no built haproxytech image at " + p + " (" + err.Error() + "): build it with `sh hack/image.sh && sh hack/image-haproxytech.sh` (root)"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	var index struct {
		Manifests []struct {
			Digest string `json:"digest"`
		} `json:"manifests"`
	}
	readJSON(t, p, "index.json", &index)
	if len(index.Manifests) != 1 {
		t.Fatalf("index.json of %s: %d manifests; want one image", p, len(index.Manifests))
	}
	var manifest struct {
		Config struct {
			Digest string `json:"digest"`
		} `json:"config"`
		Layers []struct {
			Digest string `json:"digest"`
		} `json:"layers"`
	}
	readJSON(t, p, blobPath(index.Manifests[0].Digest), &manifest)
	img := ociImage{archive: p}
	readJSON(t, p, blobPath(manifest.Config.Digest), &img)
	for _, l := range manifest.Layers {
		img.layers = append(img.layers, blobPath(l.Digest))
	}
	return img
}

// The built haproxytech image keeps the Dockerfile's ENTRYPOINT, CMD,
// STOPSIGNAL and HAPSUPER_* settings over the base's (/start.sh, SIGUSR1
// in the s6 image), holds the stand-in controller's layout, gopherd as a
// link to hapsuper and hapsuper's run directory, 0700, owned by haproxy.
func TestBuiltHAProxyTechImage(t *testing.T) {
	img := loadHAProxyTechArchive(t)
	df := loadDropIn(t, dropIns[0].path)
	c := img.Config
	if !slices.Equal(c.Entrypoint, df.entrypoint) || len(c.Cmd) != 0 {
		t.Errorf("image entrypoint %q cmd %q: want the Dockerfile's %q and no CMD", c.Entrypoint, c.Cmd, df.entrypoint)
	}
	if c.StopSignal != df.stopSignal {
		t.Errorf("image stop signal %q, want the Dockerfile's %q", c.StopSignal, df.stopSignal)
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
	for _, f := range []string{"usr/local/sbin/haproxy", "usr/local/sbin/haproxy_wrapper", "haproxy-ingress-controller", "etc/haproxy/haproxy.cfg", "etc/gopherd/gopherd.yml"} {
		if entries[f] == nil {
			t.Errorf("the stand-in layout lacks /%s", f)
		}
	}
	link := entries[strings.TrimPrefix(filepath.Join(dropIns[0].gopherdDir, "gopherd"), "/")]
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
