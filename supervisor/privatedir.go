package supervisor

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// checkPrivateDir reports whether another user could replace what hapsuper
// keeps in dir (its sockets, the override file): dir and every directory above it
// must belong to this process's user or to root, and must not be writable
// by group or others unless their sticky bit is set (then only a file's
// owner may rename or remove it, as in /tmp or a Memory emptyDir, 1777).
// A disk-backed emptyDir is 0777 without the sticky bit: any uid of the pod
// could rename its own socket over the master CLI (fake counters: a drain
// ended quiet while a client sent) or its own file over the override file
// (run as root at the next reload). The error names the directory and what
// to change.
func checkPrivateDir(dir string) error {
	resolved, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return fmt.Errorf("check directory %s: %w", dir, err)
	}
	uid := uint32(os.Geteuid())
	for d := resolved; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return fmt.Errorf("check directory %s: %w", d, err)
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return fmt.Errorf("check directory %s: no owner information", d)
		}
		switch {
		case st.Uid != uid && st.Uid != 0:
			return fmt.Errorf("directory %s (holding %s) belongs to uid %d, not to this process's uid %d or root: its owner can replace hapsuper's sockets and files; use a directory of this user's, such as an emptyDir with medium: Memory", d, dir, st.Uid, uid)
		case fi.Mode().Perm()&0o022 != 0 && fi.Mode()&os.ModeSticky == 0:
			return fmt.Errorf("directory %s (holding %s) is writable by other users (mode %04o, no sticky bit): any of them can replace hapsuper's sockets and files; chmod it 0700 (or 1777), or use an emptyDir with medium: Memory", d, dir, fi.Mode().Perm())
		}
		if d == filepath.Dir(d) {
			return nil
		}
	}
}
