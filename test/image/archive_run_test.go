package image_test

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hapsuper/hapsuper/conf"
)

// extractLayers unpacks the image's layers, in order, into root: the
// image's file system as a container runtime lays it out (owners, modes,
// links, device nodes, whiteouts).
func extractLayers(t *testing.T, img ociImage, root string) {
	t.Helper()
	for _, lp := range img.layers {
		blobs, err := readBlobs(img.archive, func(n string) bool { return n == lp })
		if err != nil {
			t.Fatal(err)
		}
		r, err := layerReader(blobs[lp])
		if err != nil {
			t.Fatalf("layer %s: %v", lp, err)
		}
		if err := extractLayer(tar.NewReader(r), root); err != nil {
			t.Fatalf("extract layer %s: %v", lp, err)
		}
	}
}

func extractLayer(tr *tar.Reader, root string) error {
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		name := filepath.Clean("/" + h.Name)
		p := filepath.Join(root, name)
		base := filepath.Base(name)
		switch {
		case base == ".wh..wh..opq":
			entries, _ := os.ReadDir(filepath.Dir(p))
			for _, e := range entries {
				os.RemoveAll(filepath.Join(filepath.Dir(p), e.Name()))
			}
			continue
		case strings.HasPrefix(base, ".wh."):
			os.RemoveAll(filepath.Join(filepath.Dir(p), strings.TrimPrefix(base, ".wh.")))
			continue
		}
		if h.Typeflag != tar.TypeDir {
			os.RemoveAll(p) // a later layer replaces what an earlier one had
		}
		mode := os.FileMode(h.Mode & 0o7777)
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
			if err != nil {
				return err
			}
			_, err = io.Copy(f, tr)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		case tar.TypeSymlink:
			if err := os.Symlink(h.Linkname, p); err != nil {
				return err
			}
			if err := os.Lchown(p, h.Uid, h.Gid); err != nil {
				return err
			}
			continue
		case tar.TypeLink:
			if err := os.Link(filepath.Join(root, filepath.Clean("/"+h.Linkname)), p); err != nil {
				return err
			}
			continue
		case tar.TypeChar, tar.TypeBlock, tar.TypeFifo:
			kind := map[byte]uint32{tar.TypeChar: syscall.S_IFCHR, tar.TypeBlock: syscall.S_IFBLK, tar.TypeFifo: syscall.S_IFIFO}[h.Typeflag]
			dev := unix.Mkdev(uint32(h.Devmajor), uint32(h.Devminor))
			if err := syscall.Mknod(p, kind|uint32(mode), int(dev)); err != nil {
				return fmt.Errorf("mknod %s: %w", p, err)
			}
		default:
			return fmt.Errorf("%s: tar entry type %q not handled", h.Name, h.Typeflag)
		}
		if err := os.Lchown(p, h.Uid, h.Gid); err != nil {
			return err
		}
		if err := os.Chmod(p, mode); err != nil { // after chown, which clears setuid bits
			return err
		}
	}
}

// passwdIDs returns the uid and gid of user in root's /etc/passwd.
func passwdIDs(t *testing.T, root, user string) (int, int) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "etc/passwd"))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		f := strings.Split(line, ":")
		var uid, gid int
		if len(f) >= 4 && f[0] == user {
			if _, err := fmt.Sscan(f[2], &uid); err == nil {
				if _, err := fmt.Sscan(f[3], &gid); err == nil {
					return uid, gid
				}
			}
		}
	}
	t.Fatalf("no user %q in the image's /etc/passwd", user)
	return -1, -1
}

// TestBuiltImageRuns runs the built image as a container runtime would, but
// for its namespaces: its layers unpacked into a root, its ENTRYPOINT + CMD
// run chrooted there in its working directory, as its user, with its
// environment, and a configuration where the image's CMD expects one. The
// hapsuper that the Dockerfile built must start the image's HAProxy as that
// user, serve, drain on the image's STOPSIGNAL and exit 0.
func TestBuiltImageRuns(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: it unpacks the image with its owners and device nodes, and chroots into it")
	}
	img := loadArchive(t)
	c := img.Config
	root, err := os.MkdirTemp("", "hapsuper-image-root-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	extractLayers(t, img, root)
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	uid, gid := passwdIDs(t, root, c.User)

	port := freePort(t)
	cfg := filepath.Join(root, conf.DefaultHAProxy[len(conf.DefaultHAProxy)-1])
	if err := os.WriteFile(cfg, fmt.Appendf(nil, exampleConfig, port), 0o644); err != nil {
		t.Fatal(err)
	}
	argv := slices.Concat(c.Entrypoint, c.Cmd)
	env := append(slices.Clone(c.Env),
		conf.EnvName("grace-period")+"=10s",
		conf.EnvName("quiet-period")+"=1s",
		conf.EnvName("log-format")+"=json",
	)
	t.Logf("running %q chrooted into the image (%s), as %s (%d:%d) in %s", argv, root, c.User, uid, gid, c.WorkingDir)
	p := startIn(t, root, c.WorkingDir, argv, env, uid, gid)

	starting := p.waitLog(t, "hapsuper starting", 10*time.Second)
	if v, _ := starting["version"].(string); v == "" || v == "dev" {
		t.Errorf("hapsuper version %q: want the VERSION build argument image.sh passes", v)
	}
	started := p.waitLog(t, "haproxy started", 10*time.Second)
	p.waitLog(t, "haproxy ready", 10*time.Second)
	master := int(started["pid"].(float64))
	if got := procUID(t, master); got != uid {
		t.Errorf("HAProxy master %d runs as uid %d, want the image's user %s (%d)", master, got, c.User, uid)
	}
	if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", master)); err != nil || !strings.HasPrefix(exe, root+"/") {
		t.Errorf("HAProxy master's executable %q (%v): want the image's, under %s", exe, err, root)
	}
	url := fmt.Sprintf("http://127.0.0.1:%d/", port)
	if code := httpGet(t, url); code != http.StatusOK {
		t.Fatalf("GET %s: %d, want 200", url, code)
	}

	sig, err := conf.ParseSignal(c.StopSignal)
	if err != nil {
		t.Fatalf("image StopSignal %q: %v", c.StopSignal, err)
	}
	stopAt := time.Now()
	if err := p.Signal(sig); err != nil {
		t.Fatal(err)
	}
	drain := p.waitLog(t, "drain started", 2*time.Second)
	if drain["signal"] != conf.SignalName(sig) {
		t.Errorf("drain started by %v, want %s", drain["signal"], conf.SignalName(sig))
	}
	if code := httpGet(t, url); code != http.StatusOK {
		t.Errorf("GET %s while draining: %d, want 200", url, code)
	}
	ended := p.waitLog(t, "drain ended", 8*time.Second)
	if ended["reason"] != "quiet" {
		t.Errorf("drain ended with reason %v (%v), want quiet", ended["reason"], ended["detail"])
	}
	code, err := p.wait(2 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s at +0, drain ended after %.2fs (%v), exit %d at +%s", sig, ended["duration_s"], ended["reason"], code, time.Since(stopAt).Round(time.Millisecond))
	if code != 0 {
		t.Errorf("hapsuper exited %d after a clean drain, want 0", code)
	}
}
