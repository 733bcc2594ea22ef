package conf

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
)

// overrideText is the override file. HAProxy reads it after the user's files,
// so its global values win over theirs.
func overrideText(s Settings) string {
	return fmt.Sprintf(overrideMark+`: bounds every soft stop (drain, reload leftovers) within the grace budget
global
    hard-stop-after %dms
`, s.Budget().Milliseconds())
}

// overrideMark begins every override file: a file at the path that does
// not begin with it is someone else's, and is not overwritten.
const overrideMark = "# written by hapsuper"

// WriteOverride writes the override file, a global section with
// hard-stop-after set to the stop budget, atomically (a temporary file renamed
// into place). It creates the file's directory with mode 0700 when missing;
// the file is 0644 so HAProxy can read it whatever user it runs as.
func WriteOverride(s Settings) error {
	dir := filepath.Dir(s.OverrideFile)
	if err := checkOverridePath(s.OverrideFile); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create directory %s for the override file: %w: make it writable or set --override-file", dir, err)
	}
	tmp, err := os.CreateTemp(dir, ".override-*.tmp")
	if err != nil {
		return fmt.Errorf("write override file %s: %w: make %s writable or set --override-file", s.OverrideFile, err, dir)
	}
	defer os.Remove(tmp.Name()) // after a successful rename this fails harmlessly
	_, err = tmp.WriteString(overrideText(s))
	if err == nil {
		err = tmp.Chmod(0o644)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), s.OverrideFile)
	}
	if err != nil {
		return fmt.Errorf("write override file %s: %w", s.OverrideFile, err)
	}
	return nil
}

// checkOverridePath refuses to replace a file at path that hapsuper did not
// write (an --override-file equal to one of HAProxy's -f files would lose
// the user's configuration) or that is not a regular file.
func checkOverridePath(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return nil // nothing to keep; making the directory says what is wrong
	}
	if err != nil {
		return fmt.Errorf("check override file %s: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("override file %s exists and is not a regular file (%s): remove it or set --override-file elsewhere", path, fi.Mode().Type())
	}
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("check override file %s: %w", path, err)
	}
	defer f.Close()
	head := make([]byte, len(overrideMark))
	if n, _ := io.ReadFull(f, head); n < len(head) || string(head) != overrideMark {
		return fmt.Errorf("override file %s exists and was not written by hapsuper (it may be one of your configuration files): hapsuper will not overwrite it; set --override-file to a path of its own", path)
	}
	return nil
}
