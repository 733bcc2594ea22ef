package supervisor

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// One hapsuper per runtime directory: the second lock fails naming the
// holder's pid and the directory, and says what to do; once the holder
// releases it (the process died), the directory can be taken again.
func TestInstanceLockIsExclusive(t *testing.T) {
	dir := t.TempDir()
	first, err := lockInstance(dir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, lockFileName))
	if err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(os.Getpid()) {
		t.Fatalf("lock file holds %q (%v), want this pid %d", b, err, os.Getpid())
	}
	_, err = lockInstance(dir)
	if err == nil {
		t.Fatal("a second lock of the same directory succeeded")
	}
	for _, want := range []string{"pid " + strconv.Itoa(os.Getpid()), dir, "hapsuper status", "another runtime directory"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	first.release()
	again, err := lockInstance(dir)
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	again.release()
}

// A symbolic link at the lock's path is not followed.
func TestInstanceLockRefusesASymlink(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "elsewhere")
	if err := os.WriteFile(target, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(dir, lockFileName)); err != nil {
		t.Fatal(err)
	}
	if l, err := lockInstance(dir); err == nil {
		l.release()
		t.Fatal("lock through a symbolic link succeeded")
	}
	if b, _ := os.ReadFile(target); string(b) != "keep" {
		t.Errorf("the link's target was written: %q", b)
	}
}
