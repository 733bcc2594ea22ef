package image_test

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hapsuper/hapsuper/conf"
)

// The archive hack/image.sh writes: the Dockerfile built by buildah and
// exported with `buildah push … oci-archive:`.
const (
	archiveEnv     = "HAPSUPER_IMAGE_CACHE"
	archiveDefault = "/var/cache/hapsuper/image"
	archiveName    = "hapsuper-haproxy.oci.tar"
)

// ociImage is what the tests read back from the archive: the image's
// configuration and its layers, in order, as blobs of the archive.
type ociImage struct {
	Config struct {
		Entrypoint []string          `json:"Entrypoint"`
		Cmd        []string          `json:"Cmd"`
		User       string            `json:"User"`
		StopSignal string            `json:"StopSignal"`
		WorkingDir string            `json:"WorkingDir"`
		Env        []string          `json:"Env"`
		Labels     map[string]string `json:"Labels"`
	} `json:"config"`
	OS           string   `json:"os"`
	Architecture string   `json:"architecture"`
	layers       []string // blob paths in the archive
	archive      string
}

// archivePath returns the archive, or skips the test when it is missing
// (fails it when CI=true), saying how to make it.
func archivePath(t *testing.T) string {
	t.Helper()
	dir := os.Getenv(archiveEnv)
	if dir == "" {
		dir = archiveDefault
	}
	p := filepath.Join(dir, archiveName)
	if _, err := os.Stat(p); err != nil {
		msg := fmt.Sprintf("no built image at %s (%v): build it with `bash hack/image.sh` (root, buildah from apt; ~10 minutes cold)", p, err)
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return p
}

// readBlob reads one file of a tar archive into memory; name is the
// archive's path ("index.json", "blobs/sha256/<hex>").
func readBlob(p, name string) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	tr := tar.NewReader(bufio.NewReader(f))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("no %s in %s", name, p)
		}
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", p, err)
		}
		if path.Clean(h.Name) != name {
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			return nil, fmt.Errorf("read %s in %s: %w", name, p, err)
		}
		return b, nil
	}
}

func blobPath(digest string) string {
	return "blobs/" + strings.Replace(digest, ":", "/", 1)
}

// loadArchive reads index.json, the image's manifest and its configuration.
func loadArchive(t *testing.T) ociImage {
	t.Helper()
	return readArchive(t, archivePath(t))
}

// readArchive reads the image of the OCI archive p: index.json, its one
// manifest and its configuration.
func readArchive(t *testing.T, p string) ociImage {
	t.Helper()
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
			Digest    string `json:"digest"`
			MediaType string `json:"mediaType"`
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

// readJSON decodes the file name of the archive p into v.
func readJSON(t *testing.T, p, name string, v any) {
	t.Helper()
	b, err := readBlob(p, name)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s in %s: %v", name, p, err)
	}
}

// TestBuiltImageConfig: the image built from the Dockerfile (hack/image.sh)
// carries the Dockerfile's ENTRYPOINT, CMD, USER and STOPSIGNAL, and the
// base image's working directory, as the container runtime will read them.
func TestBuiltImageConfig(t *testing.T) {
	want := loadImage(t)
	img := loadArchive(t)
	c := img.Config
	t.Logf("%s: %s/%s, entrypoint %q, cmd %q, user %q, stop signal %q, workdir %q, %d layers",
		img.archive, img.OS, img.Architecture, c.Entrypoint, c.Cmd, c.User, c.StopSignal, c.WorkingDir, len(img.layers))
	if !slices.Equal(c.Entrypoint, want.entrypoint) {
		t.Errorf("built Entrypoint %q, the Dockerfile says %q", c.Entrypoint, want.entrypoint)
	}
	if !slices.Equal(c.Cmd, want.cmd) || !slices.Equal(c.Cmd, conf.DefaultHAProxy) {
		t.Errorf("built Cmd %q, the Dockerfile says %q (conf.DefaultHAProxy %q)", c.Cmd, want.cmd, conf.DefaultHAProxy)
	}
	if c.User != want.user {
		t.Errorf("built User %q, the Dockerfile says %q", c.User, want.user)
	}
	if c.StopSignal != want.stopSignal {
		t.Errorf("built StopSignal %q, the Dockerfile says %q", c.StopSignal, want.stopSignal)
	}
	if c.WorkingDir != "/var/lib/haproxy" {
		t.Errorf("built WorkingDir %q, want the official haproxy image's /var/lib/haproxy", c.WorkingDir)
	}
	if img.OS != "linux" || len(img.layers) == 0 {
		t.Errorf("built image for os %q with %d layers, want linux and at least one", img.OS, len(img.layers))
	}
}

// forEachEntry hands f every entry of the image's layers, in order, with
// the reader of its content; an entry that cannot be read or that f
// refuses fails the test.
func forEachEntry(t *testing.T, img ociImage, f func(*tar.Header, *tar.Reader) error) {
	t.Helper()
	for _, lp := range img.layers {
		b, err := readBlob(img.archive, lp)
		if err != nil {
			t.Fatal(err)
		}
		var r io.Reader = bytes.NewReader(b)
		if len(b) > 2 && b[0] == 0x1f && b[1] == 0x8b { // gzip-compressed
			if r, err = gzip.NewReader(r); err != nil {
				t.Fatalf("layer %s: %v", lp, err)
			}
		}
		tr := tar.NewReader(r)
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err == nil {
				err = f(h, tr)
			}
			if err != nil {
				t.Fatalf("layer %s: %v", lp, err)
			}
		}
	}
}

// passwdIDs returns the uid and gid of user in an /etc/passwd; -1 when
// it has no such user.
func passwdIDs(passwd []byte, user string) (uid, gid int) {
	for line := range strings.SplitSeq(string(passwd), "\n") {
		f := strings.Split(line, ":")
		if len(f) < 4 || f[0] != user {
			continue
		}
		if _, err := fmt.Sscan(f[2], &uid); err == nil {
			if _, err := fmt.Sscan(f[3], &gid); err == nil {
				return uid, gid
			}
		}
	}
	return -1, -1
}

// TestBuiltImageFiles: in the built image hapsuper is at the ENTRYPOINT's
// path, executable and static, and the run directory belongs to the user
// the image runs as (the base image's haproxy, uid 99), mode 0700.
func TestBuiltImageFiles(t *testing.T) {
	img := loadArchive(t)
	runDirName := strings.TrimPrefix(runDir(t), "/")
	entries := map[string]*tar.Header{}
	var passwd, binary []byte
	forEachEntry(t, img, func(h *tar.Header, tr *tar.Reader) (err error) {
		name := strings.TrimPrefix(path.Clean(h.Name), "/")
		entries[name] = h
		switch name {
		case "etc/passwd":
			passwd, err = io.ReadAll(tr)
		case strings.TrimPrefix(binaryPath, "/"):
			binary, err = io.ReadAll(tr)
		}
		return err
	})

	uid, gid := passwdIDs(passwd, img.Config.User)
	if uid != 99 || gid != 99 {
		t.Errorf("user %q in the image's /etc/passwd has uid:gid %d:%d, want 99:99 (the official haproxy image's)", img.Config.User, uid, gid)
	}

	bin := entries[strings.TrimPrefix(binaryPath, "/")]
	if bin == nil || bin.Typeflag != tar.TypeReg || bin.Mode&0o111 == 0 {
		t.Fatalf("%s in the image: %+v, want an executable file", binaryPath, bin)
	}
	if bytes.Contains(binary, []byte("/lib64/ld-linux")) || bytes.Contains(binary, []byte("/lib/ld-musl")) {
		t.Errorf("%s names a dynamic loader: want a static binary (CGO_ENABLED=0)", binaryPath)
	}

	// /var/run is a symbolic link to /run in Debian roots: the directory
	// lands under whichever the layers hold.
	dir := entries[runDirName]
	if l := entries["var/run"]; dir == nil && l != nil && l.Typeflag == tar.TypeSymlink {
		dir = entries[path.Join(strings.TrimPrefix(l.Linkname, "/"), path.Base(runDirName))]
	}
	if dir == nil || dir.Typeflag != tar.TypeDir || dir.Mode&0o777 != 0o700 || dir.Uid != uid || dir.Gid != gid {
		t.Errorf("run directory /%s in the image: %+v, want a directory 0700 owned by %d:%d", runDirName, dir, uid, gid)
	}
	t.Logf("%s: %d bytes, mode %o; run directory mode %o owner %d:%d", binaryPath, len(binary), bin.Mode, dir.Mode, dir.Uid, dir.Gid)
}
