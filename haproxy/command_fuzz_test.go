package haproxy

import (
	"slices"
	"strings"
	"testing"

	"github.com/hapsuper/hapsuper/conf"
	"github.com/hapsuper/hapsuper/haproxy/cmdline"
)

// FuzzCommand: for any run command line that conf.Parse accepts, Command
// runs HAProxy's binary with -W or -Ws, -db, the master socket hapsuper
// talks to and the override file last.
//
// Seeds: the image's command (Dockerfile ENTRYPOINT + CMD), the commands of
// deploy/ and the README's examples, and HAProxy commands with -S, -W, -db
// and files after a second --.
func FuzzCommand(f *testing.F) {
	for _, args := range []string{
		"",
		"-- haproxy -f /usr/local/etc/haproxy/haproxy.cfg", // deploy/base
		"--routing=off --log-format json --ignore-frontends probe",
		"-- -f x.cfg", // docker run IMAGE -f x.cfg
		"--master-socket /run/m.sock -- haproxy -S /run/m.sock,mode,600 -f a.cfg -- b.cfg",
		"-- haproxy -W -db -S unix@/run/x.sock -f /etc/haproxy",
		"-- haproxy -S",
		"--master-socket= --status-socket= --override-file=",
	} {
		f.Add(args)
	}
	f.Fuzz(func(t *testing.T, args string) {
		var argv []string // split at spaces and NULs, empty arguments kept
		if args != "" {
			argv = strings.Split(strings.ReplaceAll(args, " ", "\x00"), "\x00")
		}
		s, err := conf.Parse(argv, nil)
		if err != nil {
			return // conf's FuzzParse judges the refusals
		}
		for _, notify := range []bool{false, true} {
			cmd := Command(s, notify)
			if len(cmd) < 2 || cmd[0] != s.HAProxy[0] || cmd[len(cmd)-1] != s.OverrideFile || !slices.Contains(cmd, "-db") {
				t.Fatalf("Parse(%q): Command(%v) = %q, want %q first, -db, and %q last", argv, notify, cmd, s.HAProxy[0], s.OverrideFile)
			}
			mode := "-W"
			if notify {
				mode = "-Ws"
			}
			if !slices.Contains(cmd, mode) && !slices.Contains(cmd, "-Ws") {
				t.Fatalf("Parse(%q): Command(%v) = %q, want %s", argv, notify, cmd, mode)
			}
			// A value option left without its value takes the next argument,
			// hapsuper's included: the rule holds for well-formed commands.
			// Parse accepts an empty --master-socket (and an empty -S unix@
			// address), which no HAProxy listens on: not checked here until
			// validate refuses it.
			if wellFormed(s.HAProxy) && s.MasterSocket != "" {
				if sock, ok := cmdline.Scan(cmd).MasterSocket(); !ok || sock != s.MasterSocket {
					t.Fatalf("Parse(%q): Command(%v) = %q listens on %q, hapsuper talks to %q", argv, notify, cmd, sock, s.MasterSocket)
				}
			}
		}
	})
}

// wellFormed tells whether every value option of HAProxy's options (before
// any "--") is followed by a value that is not itself an option.
func wellFormed(command []string) bool {
	opts := command[1:]
	if i := slices.Index(opts, "--"); i >= 0 {
		opts = opts[:i]
	}
	for i := 0; i < len(opts); i++ {
		if slices.Contains(cmdline.ValueOptions, opts[i]) {
			if i+1 >= len(opts) || strings.HasPrefix(opts[i+1], "-") {
				return false
			}
			i++
		}
	}
	return true
}
