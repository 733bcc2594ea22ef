package haproxy

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/hapsuper/hapsuper/conf"
	"github.com/hapsuper/hapsuper/haproxy/cmdline"
)

// MasterSocketFromCommand reports whether the master socket is the -S of
// HAProxy's command (the user's, in a place of the user's choosing) rather
// than --master-socket.
func MasterSocketFromCommand(s conf.Settings) bool {
	_, ok := cmdline.Scan(s.HAProxy).MasterSocket()
	return ok
}

// Command returns HAProxy's argv: the user's, plus what hapsuper needs when
// missing — -W (or -Ws when notify; a user's -W becomes -Ws only when notify),
// -db (a `daemon` line would otherwise detach the master) and
// -S <MasterSocket>,mode,600,level,admin — and then the override file last,
// so its global values win.
func Command(s conf.Settings, notify bool) []string {
	a := cmdline.Scan(s.HAProxy)
	opts := slices.Clone(a.Options)
	switch {
	case a.W >= 0 && notify:
		opts[a.W] = "-Ws"
	case a.W < 0 && a.Ws < 0 && notify:
		opts = append(opts, "-Ws")
	case a.W < 0 && a.Ws < 0:
		opts = append(opts, "-W")
	}
	if a.Db < 0 {
		opts = append(opts, "-db")
	}
	if _, ok := a.MasterSocket(); !ok {
		opts = append(opts, "-S", s.MasterSocket+",mode,600,level,admin")
	}
	cmd := append([]string{a.Binary}, opts...)
	if a.HasDashDash {
		// After "--" every argument is a file: the override is the last one.
		cmd = append(cmd, "--")
		cmd = append(cmd, a.Files...)
		return append(cmd, s.OverrideFile)
	}
	return append(cmd, "-f", s.OverrideFile)
}

// ConfigFiles returns the configuration files HAProxy's command loads, in
// HAProxy's order: the -f values, then the files after "--"; a directory means
// its *.cfg files in lexical order. Relative paths are taken from -C when
// given. The override file is left out. A missing file is an error naming it.
func ConfigFiles(s conf.Settings) ([]string, error) {
	a := cmdline.Scan(s.HAProxy)
	var files []string
	for _, name := range append(slices.Clone(a.Configs), a.Files...) {
		if a.Chdir != "" && !filepath.IsAbs(name) {
			name = filepath.Join(a.Chdir, name)
		}
		if filepath.Clean(name) == filepath.Clean(s.OverrideFile) {
			if err := checkOverridePath(name); err != nil {
				return nil, fmt.Errorf("-f %s is also --override-file: %w", name, err)
			}
			continue // hapsuper's own file, given again
		}
		found, err := configPath(name)
		if err != nil {
			return nil, err
		}
		files = append(files, found...)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("find HAProxy configuration in %q: no file given: add -f <file> to HAProxy's command after --", strings.Join(s.HAProxy, " "))
	}
	return files, nil
}

// configPath expands one -f value: a file, or a directory's regular *.cfg
// files (symbolic links followed, as in a Kubernetes ConfigMap volume) as
// HAProxy picks them (haproxyReads).
func configPath(name string) ([]string, error) {
	info, err := os.Stat(name)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("read HAProxy configuration %s: it does not exist: mount it or fix the -f path", name)
	}
	if err != nil {
		return nil, fmt.Errorf("read HAProxy configuration %s: %w", name, err)
	}
	if !info.IsDir() {
		return []string{name}, nil
	}
	entries, err := os.ReadDir(name) // sorted by file name, as HAProxy does
	if err != nil {
		return nil, fmt.Errorf("read HAProxy configuration directory %s: %w", name, err)
	}
	var files []string
	for _, e := range entries {
		if !haproxyReads(e.Name()) {
			continue
		}
		path := filepath.Join(name, e.Name())
		if fi, err := os.Stat(path); err != nil || !fi.Mode().IsRegular() {
			continue
		}
		files = append(files, path)
	}
	return files, nil
}

// haproxyReads reports whether HAProxy loads a directory's file of this
// name: not hidden, and its first ".cfg" ends it (haproxy.c: a name
// starting with '.', or whose strstr(".cfg") is not at its end, is
// skipped; so is "a.cfg.cfg").
func haproxyReads(name string) bool {
	i := strings.Index(name, ".cfg")
	return !strings.HasPrefix(name, ".") && i >= 0 && i+len(".cfg") == len(name)
}
