package integration

// The suite runs every test once per HAProxy version: the host's (Debian
// bookworm's 2.6 at /usr/sbin/haproxy) and the Debian roots that
// `hack/haproxy-root.sh <version>` makes, with Debian trixie's 3.0,
// forky's 3.2 and experimental's 3.4, in
// ${HAPSUPER_HAPROXY_ROOTS:-/var/cache/hapsuper}/haproxy-<version>. Each
// test calls eachHAProxy, which makes one parallel subtest per version,
// named haproxy-<major.minor>. A version whose root is missing is a
// skipped subtest saying how to make it (a failure of TestHAProxyVersions
// in CI, CI=true).
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
	"strings"
	"testing"

	"github.com/hapsuper/hapsuper/haproxy"
)

// haproxyVersion is one HAProxy build the suite runs against.
type haproxyVersion struct {
	name    string // major.minor, as `haproxy -v` says: "2.6", "3.0"
	line    string // the first line of `haproxy -v`
	root    string // a Debian root with this HAProxy at /usr/sbin/haproxy; "" for the host's
	version haproxy.Version
}

// rootVersions are the branches run from roots of hack/haproxy-root.sh,
// beside the host's.
var rootVersions = []string{"3.0", "3.2", "3.4"}

// rootsDefault is where hack/haproxy-root.sh makes its roots unless
// HAPSUPER_HAPROXY_ROOTS says otherwise.
const rootsDefault = "/var/cache/hapsuper"

// missingVersion is a version the suite should cover but cannot run.
type missingVersion struct {
	name string // "3.2"
	why  string // what is missing and how to make it
}

var (
	// versions are the HAProxy versions every test runs against.
	versions []haproxyVersion
	// missingVersions are the versions not run (none when every one is).
	// In CI (CI=true) TestHAProxyVersions fails with them; elsewhere
	// their subtests skip with them.
	missingVersions []missingVersion
)

// discoverVersions finds the host's HAProxy and each root's.
func discoverVersions() error {
	host, err := probeVersion("")
	if err != nil {
		return err
	}
	versions = []haproxyVersion{host}
	roots := os.Getenv("HAPSUPER_HAPROXY_ROOTS")
	if roots == "" {
		roots = rootsDefault
	}
	for _, name := range rootVersions {
		v, why := probeRoot(name, filepath.Join(roots, "haproxy-"+name))
		if why != "" {
			missingVersions = append(missingVersions, missingVersion{name: name, why: why})
			continue
		}
		versions = append(versions, v)
	}
	return nil
}

// probeRoot returns the HAProxy of root, which must be of branch name, or
// why it cannot be run.
func probeRoot(name, root string) (haproxyVersion, string) {
	build := fmt.Sprintf("`bash hack/haproxy-root.sh %s` (30-90 s, 230-300 MB, needs root and a Debian mirror)", name)
	if _, err := os.Stat(filepath.Join(root, "usr/sbin/haproxy")); err != nil {
		return haproxyVersion{}, fmt.Sprintf("HAProxy %s not tested: no root at %s (%v); make it with %s", name, root, err, build)
	}
	v, err := probeVersion(root)
	switch {
	case err != nil:
		return haproxyVersion{}, fmt.Sprintf("HAProxy %s not tested: the root %s does not run: %v; remove it and run %s again", name, root, err, build)
	case v.name != name:
		return haproxyVersion{}, fmt.Sprintf("HAProxy %s not tested: the root %s holds %q; remove it and run %s again", name, root, v.line, build)
	}
	return v, ""
}

// probeVersion runs `haproxy -v` on the host (root "") or in root.
func probeVersion(root string) (haproxyVersion, error) {
	cmd := exec.Command(haproxyBin, "-v")
	if root != "" {
		cmd = exec.Command("chroot", root, haproxyBin, "-v")
	}
	out, err := cmd.Output()
	if err != nil {
		return haproxyVersion{}, fmt.Errorf("%s: %w", strings.Join(cmd.Args, " "), err)
	}
	v, err := haproxy.ParseVersion(string(out))
	if err != nil {
		return haproxyVersion{}, fmt.Errorf("%s: %w", strings.Join(cmd.Args, " "), err)
	}
	return haproxyVersion{name: v.Branch(), line: v.Line, root: root, version: v}, nil
}

// eachHAProxy runs f as a parallel subtest "haproxy-<version>" for every
// version found (the test itself runs in parallel with the others), and
// a skipped subtest for every version missing. It skips when the machine
// cannot run the suite.
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
	for _, m := range missingVersions {
		t.Run("haproxy-"+m.name, func(t *testing.T) { t.Skip(m.why) })
	}
}

// TestHAProxyVersions names the versions the suite runs against, and fails
// in CI when a root is missing (run hack/haproxy-root.sh for it).
func TestHAProxyVersions(t *testing.T) {
	requireRoot(t)
	for _, h := range versions {
		where := "host"
		if h.root != "" {
			where = "chroot " + h.root
		}
		t.Logf("haproxy-%s: %s (%s)", h.name, h.line, where)
	}
	if len(missingVersions) == 0 {
		return
	}
	var whys []string
	for _, m := range missingVersions {
		whys = append(whys, m.why)
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI must test every version:\n%s", strings.Join(whys, "\n"))
	}
	t.Skip(strings.Join(whys, "\n"))
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
