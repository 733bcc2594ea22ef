package conf

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// argv is what hapsuper needs to know of HAProxy's command line. HAProxy
// takes an option's value as the next argument; `--` ends the options and
// every argument after it is a configuration file.
type argv struct {
	binary      string
	options     []string // between the binary and "--"
	files       []string // after "--"
	hasDashDash bool
	w, ws, db   int      // index in options of -W, -Ws, -db; -1 when absent
	s           string   // the first -S value, with its options
	configs     []string // -f values, in order
	chdir       string   // -C value
}

// valueOptions are HAProxy options whose value is the next argument.
var valueOptions = []string{"-f", "-C", "-L", "-p", "-n", "-N", "-m", "-x", "-S"}

func scanArgv(command []string) argv {
	a := argv{w: -1, ws: -1, db: -1}
	if len(command) == 0 {
		return a
	}
	a.binary = command[0]
	rest := command[1:]
	if i := slices.Index(rest, "--"); i >= 0 {
		a.options, a.files, a.hasDashDash = rest[:i], rest[i+1:], true
	} else {
		a.options = rest
	}
	for i := 0; i < len(a.options); i++ {
		opt := a.options[i]
		switch opt {
		case "-W":
			a.w = i
		case "-Ws":
			a.ws = i
		case "-db":
			a.db = i
		}
		if !slices.Contains(valueOptions, opt) || i+1 >= len(a.options) {
			continue
		}
		i++
		switch v := a.options[i]; opt {
		case "-S":
			if a.s == "" {
				a.s = v
			}
		case "-f":
			a.configs = append(a.configs, v)
		case "-C":
			a.chdir = v
		}
	}
	return a
}

// masterSocket is the address of the first -S: the part before its options,
// without a unix@ prefix.
func (a argv) masterSocket() (string, bool) {
	if a.s == "" {
		return "", false
	}
	addr, _, _ := strings.Cut(a.s, ",")
	return strings.TrimPrefix(addr, "unix@"), addr != ""
}

// MasterSocketFromCommand reports whether the master socket is the -S of
// HAProxy's command (the user's, in a place of the user's choosing) rather
// than --master-socket.
func (s Settings) MasterSocketFromCommand() bool {
	_, ok := scanArgv(s.HAProxy).masterSocket()
	return ok
}

// Command returns HAProxy's argv: the user's, plus what hapsuper needs when
// missing — -W (or -Ws when notify; a user's -W becomes -Ws only when notify),
// -db (a `daemon` line would otherwise detach the master) and
// -S <MasterSocket>,mode,600,level,admin — and then the override file last,
// so its global values win.
func (s Settings) Command(notify bool) []string {
	a := scanArgv(s.HAProxy)
	opts := slices.Clone(a.options)
	switch {
	case a.w >= 0 && notify:
		opts[a.w] = "-Ws"
	case a.w < 0 && a.ws < 0 && notify:
		opts = append(opts, "-Ws")
	case a.w < 0 && a.ws < 0:
		opts = append(opts, "-W")
	}
	if a.db < 0 {
		opts = append(opts, "-db")
	}
	if _, ok := a.masterSocket(); !ok {
		opts = append(opts, "-S", s.MasterSocket+",mode,600,level,admin")
	}
	cmd := append([]string{a.binary}, opts...)
	if a.hasDashDash {
		// After "--" every argument is a file: the override is the last one.
		cmd = append(cmd, "--")
		cmd = append(cmd, a.files...)
		return append(cmd, s.OverrideFile)
	}
	return append(cmd, "-f", s.OverrideFile)
}

// ConfigFiles returns the configuration files HAProxy's command loads, in
// HAProxy's order: the -f values, then the files after "--"; a directory means
// its *.cfg files in lexical order. Relative paths are taken from -C when
// given. The override file is left out. A missing file is an error naming it.
func (s Settings) ConfigFiles() ([]string, error) {
	a := scanArgv(s.HAProxy)
	var files []string
	for _, name := range append(slices.Clone(a.configs), a.files...) {
		if a.chdir != "" && !filepath.IsAbs(name) {
			name = filepath.Join(a.chdir, name)
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
// files (symbolic links followed, as in a Kubernetes ConfigMap volume).
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
		if !strings.HasSuffix(e.Name(), ".cfg") {
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
