package image_test

import (
	"archive/tar"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hapsuper/hapsuper/conf"
	"github.com/hapsuper/hapsuper/haproxy"
)

// extractEntry lays one layer entry out under root as a container runtime
// does (owners, modes, links, device nodes, whiteouts).
func extractEntry(h *tar.Header, tr *tar.Reader, root string) error {
	name := filepath.Clean("/" + h.Name)
	p := filepath.Join(root, name)
	base := filepath.Base(name)
	switch {
	case base == ".wh..wh..opq":
		entries, _ := os.ReadDir(filepath.Dir(p))
		for _, e := range entries {
			os.RemoveAll(filepath.Join(filepath.Dir(p), e.Name()))
		}
		return nil
	case strings.HasPrefix(base, ".wh."):
		os.RemoveAll(filepath.Join(filepath.Dir(p), strings.TrimPrefix(base, ".wh.")))
		return nil
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
		return os.Lchown(p, h.Uid, h.Gid)
	case tar.TypeLink:
		return os.Link(filepath.Join(root, filepath.Clean("/"+h.Linkname)), p)
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
	return os.Chmod(p, mode) // after chown, which clears setuid bits
}

// TestBuiltImageRuns runs the built image as a container runtime would, but
// for its namespaces: its layers unpacked into a root, its ENTRYPOINT + CMD
// run chrooted there in its working directory, as its user, with its
// environment, and a configuration where the image's CMD expects one. The
// hapsuper that the Dockerfile built must start the image's HAProxy as that
// user, serve, drain on the image's STOPSIGNAL and exit 0.
func TestBuiltImageRuns(t *testing.T) {
	img, root, uid, gid := unpackImage(t)
	c := img.Config
	port := writeExampleConfig(t, filepath.Join(root, conf.DefaultHAProxy[len(conf.DefaultHAProxy)-1]))
	argv := slices.Concat(c.Entrypoint, c.Cmd)
	env := slices.Concat(c.Env, drainEnv)
	t.Logf("running %q chrooted into the image (%s), as %s (%d:%d) in %s", argv, root, c.User, uid, gid, c.WorkingDir)
	p := startIn(t, root, c.WorkingDir, argv, env, uid, gid)

	starting := p.waitLog(t, "hapsuper starting", 10*time.Second)
	if v, _ := starting["version"].(string); v == "" || v == "dev" {
		t.Errorf("hapsuper version %q: want the VERSION build argument image.sh passes", v)
	}
	master := p.ready(t, uid)
	checkImageMaster(t, root, master)
	p.serveAndDrain(t, port, c.StopSignal)
}

// unpackImage lays the built image's layers out in a new root, as a
// container runtime does, and returns the image, the root and the uid and
// gid of the image's user. It skips the test without root.
func unpackImage(t *testing.T) (img ociImage, root string, uid, gid int) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: it unpacks the image with its owners and device nodes, and chroots into it")
	}
	img = loadArchive(t)
	root, err := os.MkdirTemp("", "hapsuper-image-root-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	forEachEntry(t, img, func(h *tar.Header, tr *tar.Reader) error { return extractEntry(h, tr, root) })
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	passwd, err := os.ReadFile(filepath.Join(root, "etc/passwd"))
	if err != nil {
		t.Fatal(err)
	}
	uid, gid = passwdIDs(passwd, img.Config.User)
	if uid < 0 {
		t.Fatalf("no user %q in the image's /etc/passwd", img.Config.User)
	}
	return img, root, uid, gid
}

// checkImageMaster asserts that the HAProxy master is the image's binary
// and of the branch of the Dockerfile's base (hack/image.sh's stand-in has
// Debian's package of that branch, not the pinned patch release).
func checkImageMaster(t *testing.T, root string, master int) {
	t.Helper()
	if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", master)); err != nil || !strings.HasPrefix(exe, root+"/") {
		t.Errorf("HAProxy master's executable %q (%v): want the image's, under %s", exe, err, root)
	}
	cmd := exec.Command("/usr/sbin/haproxy", "-v")
	cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: root}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("haproxy -v in the image: %v", err)
	}
	v, err := haproxy.ParseVersion(string(out))
	if err != nil {
		t.Fatal(err)
	}
	base := loadImage(t).base // haproxy:<HAPROXY_VERSION>
	if !strings.HasPrefix(base, "haproxy:"+v.Branch()+".") {
		t.Errorf("the image runs %s; the Dockerfile's base is %s", v.Line, base)
	}
	t.Logf("the image's HAProxy: %s", v.Line)
}
