package conf

import (
	"fmt"
	"os"
	"path/filepath"
)

// overrideText is the override file. HAProxy reads it after the user's files,
// so its global values win over theirs.
func overrideText(s Settings) string {
	return fmt.Sprintf(`# written by hapsuper: bounds every soft stop (drain, reload leftovers) within the grace budget
global
    hard-stop-after %dms
`, s.Budget().Milliseconds())
}

// WriteOverride writes the override file, a global section with
// hard-stop-after set to the stop budget, atomically (a temporary file renamed
// into place). It creates the file's directory with mode 0700 when missing;
// the file is 0644 so HAProxy can read it whatever user it runs as.
func WriteOverride(s Settings) error {
	dir := filepath.Dir(s.OverrideFile)
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
