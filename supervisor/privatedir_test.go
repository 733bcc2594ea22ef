package supervisor

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A directory only this user (or root) can write is safe, and so is one
// with the sticky bit; one writable by others without it, or under such a
// directory, is not, nor is one of another user.
func TestCheckPrivateDir(t *testing.T) {
	base := t.TempDir()
	mk := func(name string, mode os.FileMode) string {
		p := filepath.Join(base, name)
		if err := os.MkdirAll(p, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	private := mk("private", 0o700)
	sticky := mk("sticky", 0o777|os.ModeSticky)
	open := mk("open", 0o777)
	under := mk("open/inner", 0o700)
	link := filepath.Join(base, "link")
	if err := os.Symlink(open, link); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		dir, want string
	}{
		{private, ""},
		{sticky, ""},
		{open, "is writable by other users (mode 0777, no sticky bit)"},
		{under, open + " (holding " + under + ") is writable by other users"},
		{link, "is writable by other users"},
	} {
		err := checkPrivateDir(tc.dir)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("checkPrivateDir(%s): %v, want none", tc.dir, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("checkPrivateDir(%s): %v, want one saying %q", tc.dir, err, tc.want)
		}
	}
	if os.Geteuid() == 0 {
		other := mk("other", 0o700)
		if err := os.Chown(other, 4242, 4242); err != nil {
			t.Fatal(err)
		}
		if err := checkPrivateDir(other); err == nil || !strings.Contains(err.Error(), "belongs to uid 4242") {
			t.Errorf("checkPrivateDir of another user's directory: %v", err)
		}
	}
}
