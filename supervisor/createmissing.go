package supervisor

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// missingFileMode is the mode of a file createMissing creates: group-
// writable, as the s6 images' aux-cfg oneshot leaves
// /etc/haproxy/haproxy-aux.cfg for a controller of HAProxy's group.
const missingFileMode = 0o664

// createMissing creates each of paths (--create-if-missing) empty, mode
// 0664, when it does not exist, and returns the ones it created. A file
// that exists is left as it is, whatever it holds; its directory must
// exist. The path must hold no symbolic link (hapsuper, often root, would
// create or vouch for a file where the link's owner points it), no
// directory on it may be writable by every user without the sticky bit
// (any of them could put their own file there), and a file that exists
// must be a regular file no other user can write.
func createMissing(paths []string) ([]string, error) {
	var created []string
	for _, p := range paths {
		if err := checkMissingPath(p); err != nil {
			return created, err
		}
		fi, err := os.Lstat(p)
		if err == nil {
			if err := checkExisting(p, fi); err != nil {
				return created, err
			}
			continue
		}
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, missingFileMode)
		switch {
		case errors.Is(err, fs.ErrExist):
			continue // created meanwhile: someone else's, checked at the next start
		case errors.Is(err, fs.ErrNotExist):
			return created, fmt.Errorf("create %s (--create-if-missing): its directory does not exist: create it in the image or mount a volume there", p)
		case err != nil:
			return created, fmt.Errorf("create %s (--create-if-missing): %w", p, err)
		}
		if err := f.Chmod(missingFileMode); err != nil { // the umask took bits the controller needs
			f.Close()
			return created, fmt.Errorf("create %s (--create-if-missing): %w", p, err)
		}
		if err := f.Close(); err != nil {
			return created, fmt.Errorf("create %s (--create-if-missing): %w", p, err)
		}
		created = append(created, p)
	}
	return created, nil
}

// checkMissingPath walks the directories above p from the root: none may
// be a symbolic link, and none may be writable by every user without the
// sticky bit. A directory that does not exist ends the walk (the open
// then says so).
func checkMissingPath(p string) error {
	if !filepath.IsAbs(p) {
		return fmt.Errorf("create %s (--create-if-missing): not an absolute path: give the full path", p)
	}
	var dirs []string
	for d := filepath.Dir(filepath.Clean(p)); ; d = filepath.Dir(d) {
		dirs = append([]string{d}, dirs...)
		if d == filepath.Dir(d) {
			break
		}
	}
	for _, d := range dirs {
		fi, err := os.Lstat(d)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("create %s (--create-if-missing): check %s: %w", p, d, err)
		}
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			real, _ := filepath.EvalSymlinks(d)
			return fmt.Errorf("create %s (--create-if-missing): %s is a symbolic link (to %s): hapsuper does not create files through links; give the path without it", p, d, real)
		case !fi.IsDir():
			return fmt.Errorf("create %s (--create-if-missing): %s is not a directory", p, d)
		case fi.Mode().Perm()&0o002 != 0 && fi.Mode()&os.ModeSticky == 0:
			return fmt.Errorf("create %s (--create-if-missing): directory %s is writable by every user (mode %04o, no sticky bit): any of them could put their own file there; chmod it o-w (or +t)", p, d, fi.Mode().Perm())
		}
	}
	return nil
}

// checkExisting accepts a file that exists: a regular file that no other
// user can write.
func checkExisting(p string, fi fs.FileInfo) error {
	switch {
	case fi.Mode()&os.ModeSymlink != 0:
		return fmt.Errorf("create %s (--create-if-missing): it is a symbolic link: give the file it points to instead", p)
	case !fi.Mode().IsRegular():
		return fmt.Errorf("create %s (--create-if-missing): it exists and is not a regular file (%v)", p, fi.Mode().Type())
	case fi.Mode().Perm()&0o002 != 0:
		return fmt.Errorf("create %s (--create-if-missing): it exists and every user can write it (mode %04o): chmod it o-w (hapsuper creates it %04o)", p, fi.Mode().Perm(), missingFileMode)
	}
	return nil
}
