package integration

// The suite runs every test once per HAProxy version found: the host's
// (Debian bookworm's 2.6 at /usr/sbin/haproxy) and, when
// hack/haproxy-trixie.sh has made it, Debian trixie's 3.0 from a debootstrap
// root. Each test calls eachHAProxy, which makes one parallel subtest per
// version, named haproxy-<major.minor>.
//
// Running the root's HAProxy: a script in the test's directory execs
//
//	unshare --mount (private propagation) → sh (mounts) → chroot <root> /usr/sbin/haproxy "$@"
//
// Every step is an exec, so the pid hapsuper starts IS the HAProxy master:
// signals, exit codes, Pdeathsig and the master's re-exec on reload (it
// re-executes /usr/sbin/haproxy, inside the chroot) work as with the host
// binary. In its own mount namespace the script puts a tmpfs on <root>/tmp,
// binds the test directory onto the same path below it, and mounts /proc:
// the configs, the override file and the master, status and notify sockets
// have one path inside and outside, so hapsuper on the host talks to them.
// The mounts live only in that namespace, which the kernel drops with its
// last process: nothing is mounted on the host, so a failed or killed test
// leaves no mount to clean up (each test checks that in t.Cleanup).

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// haproxyVersion is one HAProxy build the suite runs against.
type haproxyVersion struct {
	name string // major.minor, as `haproxy -v` says: "2.6", "3.0"
	line string // the first line of `haproxy -v`
	root string // a Debian root with this HAProxy at /usr/sbin/haproxy; "" for the host's
}

// trixieRootDefault is where hack/haproxy-trixie.sh makes the trixie root
// unless HAPSUPER_TRIXIE_ROOT says otherwise.
const trixieRootDefault = "/var/cache/hapsuper/trixie-haproxy"

var (
	// versions are the HAProxy versions every test runs against.
	versions []haproxyVersion
	// missingVersion says why a version the suite should cover is not run
	// (empty when every one is). In CI (CI=true) TestHAProxyVersions fails
	// with it; elsewhere its subtests skip with it.
	missingVersion string
)

// discoverVersions finds the host's HAProxy and the trixie root's.
func discoverVersions() error {
	host, err := probeVersion("")
	if err != nil {
		return err
	}
	versions = []haproxyVersion{host}
	root := os.Getenv("HAPSUPER_TRIXIE_ROOT")
	if root == "" {
		root = trixieRootDefault
	}
	if _, err := os.Stat(filepath.Join(root, "usr/sbin/haproxy")); err != nil {
		missingVersion = fmt.Sprintf("HAProxy 3.0 not tested: no trixie root at %s (%v); make it with `bash hack/haproxy-trixie.sh` (about 30 s, 230 MB, needs apt)", root, err)
		return nil
	}
	v, err := probeVersion(root)
	if err != nil {
		missingVersion = fmt.Sprintf("HAProxy 3.0 not tested: the trixie root %s does not run: %v; remove it and run `bash hack/haproxy-trixie.sh` again", root, err)
		return nil
	}
	versions = append(versions, v)
	return nil
}

var versionRE = regexp.MustCompile(`^HAProxy version (\d+\.\d+)\.`)

// probeVersion runs `haproxy -v` on the host (root "") or in root.
func probeVersion(root string) (haproxyVersion, error) {
	cmd := exec.Command(haproxyBin, "-v")
	if root != "" {
		cmd = exec.Command("chroot", root, haproxyBin, "-v")
	}
	out, err := cmd.Output()
	line, _, _ := strings.Cut(string(out), "\n")
	if err != nil {
		return haproxyVersion{}, fmt.Errorf("%s: %w", strings.Join(cmd.Args, " "), err)
	}
	m := versionRE.FindStringSubmatch(line)
	if m == nil {
		return haproxyVersion{}, fmt.Errorf("%s printed %q, not a version line", strings.Join(cmd.Args, " "), line)
	}
	return haproxyVersion{name: m[1], line: line, root: root}, nil
}

// eachHAProxy runs f as a parallel subtest "haproxy-<version>" for every
// version found (the test itself runs in parallel with the others). It
// skips when the machine cannot run the suite.
func eachHAProxy(t *testing.T, f func(t *testing.T, h haproxyVersion)) {
	t.Helper()
	requireRoot(t)
	t.Parallel()
	for _, h := range versions {
		t.Run("haproxy-"+h.name, func(t *testing.T) {
			t.Parallel()
			f(t, h)
		})
	}
	if missingVersion != "" {
		t.Run("haproxy-3.0", func(t *testing.T) { t.Skip(missingVersion) })
	}
}

// TestHAProxyVersions names the versions the suite runs against, and fails
// in CI when the trixie root for 3.0 is missing (run hack/haproxy-trixie.sh).
func TestHAProxyVersions(t *testing.T) {
	requireRoot(t)
	for _, h := range versions {
		where := "host"
		if h.root != "" {
			where = "chroot " + h.root
		}
		t.Logf("haproxy-%s: %s (%s)", h.name, h.line, where)
	}
	if missingVersion == "" {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI must test every version: %s", missingVersion)
	}
	t.Skip(missingVersion)
}

// command returns the program a test runs as HAProxy: the host's binary, or
// for a version in a root a script written into dir that runs the root's
// HAProxy as the package comment describes. dir must be the directory that
// holds the test's configs and sockets.
func (h haproxyVersion) command(t *testing.T, dir string) string {
	t.Helper()
	if h.root == "" {
		return haproxyBin
	}
	path := filepath.Join(dir, "haproxy-"+h.name)
	if _, err := os.Stat(path); err == nil {
		return path // a test that starts HAProxy twice in one directory
	}
	if !strings.HasPrefix(dir, "/tmp/") || strings.ContainsAny(dir+h.root, "'\n") {
		t.Fatalf("cannot run HAProxy %s for test directory %q: it must lie under /tmp (unset TMPDIR) and hold no quote", h.name, dir)
	}
	script := fmt.Sprintf(`#!/bin/sh
# HAProxy %[1]s from %[2]s, for the test directory %[3]s (see versions_test.go).
exec unshare --mount --propagation private -- /bin/sh -euc '
root=$1 dir=$2
shift 2
mount -t tmpfs -o mode=1777,size=16m hapsuper-test-tmp "$root/tmp"
mkdir -p "$root$dir"
mount --bind "$dir" "$root$dir"
mount -t proc proc "$root/proc"
exec chroot "$root" %[4]s "$@"' haproxy-%[1]s '%[2]s' '%[3]s' "$@"
`, h.name, h.root, dir, haproxyBin)
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatalf("write the HAProxy %s wrapper: %v", h.name, err)
	}
	t.Cleanup(func() {
		if ms := mountsUnder(h.root); len(ms) > 0 {
			t.Errorf("mounts under %s leaked into the host's mount namespace: %q", h.root, ms)
		}
	})
	return path
}

// mountsUnder returns the mount points of this process's (the host's) mount
// namespace that lie under dir.
func mountsUnder(dir string) []string {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return []string{fmt.Sprintf("cannot read /proc/self/mountinfo: %v", err)}
	}
	var res []string
	for _, line := range strings.Split(string(b), "\n") {
		// id parent major:minor root mountpoint ...
		if f := strings.Fields(line); len(f) > 4 && (f[4] == dir || strings.HasPrefix(f[4], dir+"/")) {
			res = append(res, f[4])
		}
	}
	return res
}
