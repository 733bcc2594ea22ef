package supervisor

import (
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
)

// A user that is not root, with the default paths under /var/run, is told
// what to change: the three flags of hapsuper's files, or the directory's
// owner; other errors name the flag whose directory failed.
func TestMkdirFixNamesTheFlags(t *testing.T) {
	denied := &os.PathError{Op: "mkdir", Path: "/var/run/hapsuper", Err: syscall.EACCES}
	got := mkdirFix(fmt.Errorf("wrapped: %w", denied), "status-socket")
	for _, want := range []string{"--master-socket", "--status-socket", "--override-file", "HAPSUPER_STATUS_SOCKET", fmt.Sprintf("uid %d", os.Getuid())} {
		if !strings.Contains(got, want) {
			t.Errorf("mkdirFix(permission denied) = %q, lacks %q", got, want)
		}
	}
	notDir := &os.PathError{Op: "mkdir", Path: "/etc/passwd/x", Err: syscall.ENOTDIR}
	if got := mkdirFix(notDir, "override-file"); !strings.Contains(got, "--override-file") {
		t.Errorf("mkdirFix(not a directory) = %q, names no flag", got)
	}
}
