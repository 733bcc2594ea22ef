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
