// Package cmdline reads HAProxy's command line: which options it holds,
// their values, and the configuration files after `--`. It is a leaf that
// conf/ imports to take the master socket from HAProxy's own -S, and that
// haproxy/ builds the command from.
//
// It must not build or change a command line (haproxy/ does), touch a
// file, or start a process: it reads a slice of strings.
package cmdline

import (
	"slices"
	"strings"
)

// Argv is what hapsuper needs to know of HAProxy's command line. HAProxy
// takes an option's value as the next argument; `--` ends the options and
// every argument after it is a configuration file.
type Argv struct {
	Binary      string
	Options     []string // between the binary and "--"
	Files       []string // after "--"
	HasDashDash bool
	W, Ws, Db   int      // index in Options of -W, -Ws, -db; -1 when absent
	S           string   // the first -S value, with its options
	Configs     []string // -f values, in order
	Chdir       string   // -C value
}

// ValueOptions are HAProxy options whose value is the next argument.
var ValueOptions = []string{"-f", "-C", "-L", "-p", "-n", "-N", "-m", "-x", "-S"}

// Scan reads command, binary first.
func Scan(command []string) Argv {
	a := Argv{W: -1, Ws: -1, Db: -1}
	if len(command) == 0 {
		return a
	}
	a.Binary = command[0]
	rest := command[1:]
	if i := slices.Index(rest, "--"); i >= 0 {
		a.Options, a.Files, a.HasDashDash = rest[:i], rest[i+1:], true
	} else {
		a.Options = rest
	}
	for i := 0; i < len(a.Options); i++ {
		opt := a.Options[i]
		switch opt {
		case "-W":
			a.W = i
		case "-Ws":
			a.Ws = i
		case "-db":
			a.Db = i
		}
		if !slices.Contains(ValueOptions, opt) || i+1 >= len(a.Options) {
			continue
		}
		i++
		switch v := a.Options[i]; opt {
		case "-S":
			if a.S == "" {
				a.S = v
			}
		case "-f":
			a.Configs = append(a.Configs, v)
		case "-C":
			a.Chdir = v
		}
	}
	return a
}

// MasterSocket is the address of the first -S: the part before its
// options, without a unix@ prefix.
func (a Argv) MasterSocket() (string, bool) {
	if a.S == "" {
		return "", false
	}
	addr, _, _ := strings.Cut(a.S, ",")
	return strings.TrimPrefix(addr, "unix@"), addr != ""
}
