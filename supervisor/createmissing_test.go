package supervisor

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// A missing file is created empty and group-writable whatever the umask;
// one that exists keeps its content and mode; a missing directory is an
// error that names the file.
func TestCreateMissing(t *testing.T) {
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	dir := t.TempDir()
	aux := filepath.Join(dir, "haproxy-aux.cfg")
	kept := filepath.Join(dir, "kept.cfg")
	if err := os.WriteFile(kept, []byte("global\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	created, err := createMissing([]string{aux, kept})
	if err != nil || !slices.Equal(created, []string{aux}) {
		t.Fatalf("createMissing = %q, %v; want [%s]", created, err, aux)
	}
	fi, err := os.Stat(aux)
	if err != nil || fi.Size() != 0 || fi.Mode().Perm() != 0o664 {
		t.Errorf("%s: %v, %v; want empty, mode 0664", aux, fi, err)
	}
	if b, _ := os.ReadFile(kept); string(b) != "global\n" {
		t.Errorf("%s changed to %q", kept, b)
	}
	if fi, _ := os.Stat(kept); fi.Mode().Perm() != 0o600 {
		t.Errorf("%s mode changed to %v", kept, fi.Mode().Perm())
	}
	again, err := createMissing([]string{aux})
	if err != nil || len(again) != 0 {
		t.Errorf("second createMissing = %q, %v; want nothing created", again, err)
	}
	missingDir := filepath.Join(dir, "nodir", "aux.cfg")
	if _, err := createMissing([]string{missingDir}); err == nil || !strings.Contains(err.Error(), missingDir) || !strings.Contains(err.Error(), "directory does not exist") {
		t.Errorf("createMissing in a missing directory: %v", err)
	}
}

// Nothing is created through a symbolic link on the path, nor in a
// directory every user can write without the sticky bit; a file that
// exists must be a regular file no other user can write. Each refusal
// names what to change, and leaves the link's target untouched.
func TestCreateMissingRefusesUnsafePaths(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real")
	if err := os.Mkdir(real, 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	open := filepath.Join(dir, "open")
	if err := os.Mkdir(open, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	sticky := filepath.Join(dir, "sticky")
	if err := os.Mkdir(sticky, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(sticky, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	shared := filepath.Join(real, "shared.cfg")
	if err := os.WriteFile(shared, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(shared, 0o666); err != nil {
		t.Fatal(err)
	}
	fileLink := filepath.Join(real, "file-link.cfg")
	if err := os.Symlink(shared, fileLink); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path, want string
	}{
		{filepath.Join(link, "aux.cfg"), "is a symbolic link"},
		{filepath.Join(link, "sub", "aux.cfg"), "is a symbolic link"},
		{filepath.Join(open, "aux.cfg"), "writable by every user"},
		{shared, "every user can write it"},
		{fileLink, "is a symbolic link"},
		{"relative/aux.cfg", "absolute"},
	} {
		if _, err := createMissing([]string{c.path}); err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), c.path) {
			t.Errorf("createMissing(%s) = %v, want an error naming it with %q", c.path, err, c.want)
		}
	}
	if _, err := os.Stat(filepath.Join(real, "aux.cfg")); err == nil {
		t.Errorf("a file was created through the link")
	}
	if got, err := createMissing([]string{filepath.Join(sticky, "aux.cfg")}); err != nil || len(got) != 1 {
		t.Errorf("createMissing in a sticky directory = %q, %v; want it created", got, err)
	}
}
