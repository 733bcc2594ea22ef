package supervisor

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// createMissing creates each of paths (--create-if-missing) empty, mode
// 0664 (group-writable, as the s6 images' aux-cfg oneshot leaves
// /etc/haproxy/haproxy-aux.cfg for a controller of HAProxy's group), when it
// does not exist, and returns the ones it created. A file that exists is
// left as it is, whatever it holds; its directory must exist.
func createMissing(paths []string) ([]string, error) {
	var created []string
	for _, p := range paths {
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o664)
		switch {
		case errors.Is(err, fs.ErrExist):
			continue
		case errors.Is(err, fs.ErrNotExist):
			return created, fmt.Errorf("create %s (--create-if-missing): its directory does not exist: create it in the image or mount a volume there", p)
		case err != nil:
			return created, fmt.Errorf("create %s (--create-if-missing): %w", p, err)
		}
		if err := f.Chmod(0o664); err != nil { // the umask took bits the controller needs
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
