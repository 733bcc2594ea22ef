package conf

import (
	"strings"
	"testing"
)

// LBCheckAddr takes an IP address or no host and a decimal port, and
// nothing that could change the line it is written on.
func TestLBCheckAddr(t *testing.T) {
	for _, tt := range []struct{ in, want, err string }{
		{in: ":8404", want: ":8404"},
		{in: "*:8404", want: "*:8404"},
		{in: ":08404", want: ":8404"},
		{in: "127.0.0.1:8404", want: "127.0.0.1:8404"},
		{in: "0.0.0.0:1", want: "0.0.0.0:1"},
		{in: "[::]:65535", want: "[::]:65535"},
		{in: "[FD00::5]:8404", want: "[fd00::5]:8404"},
		{in: "[::ffff:10.0.0.5]:8404", want: "[::ffff:10.0.0.5]:8404"},
		{in: "127.0.0.1:8404\nglobal\n    stats socket /tmp/a.sock mode 666 level admin", err: `'\n'`},
		{in: ":8404\r", err: `'\r'`},
		{in: ":8404\tssl crt /x", err: `'\t'`},
		{in: ":8404 ssl", err: `' '`},
		{in: ":8404\x00", err: `'\x00'`},
		{in: ":84\u00a004", err: "non-ASCII"},
		{in: "#:8404", err: "not an IP address"},
		{in: "localhost:8404", err: `host "localhost" is not an IP address`},
		{in: "ipv4@127.0.0.1:8404", err: "not an IP address"},
		{in: "127.0.0.1,127.0.0.2:8404", err: "not an IP address"},
		{in: "[fe80::1%eth0]:8404", err: `zone "eth0"`},
		{in: "[fe80::1%a#b]:8404", err: `zone "a#b"`},
		{in: "::1:8404", err: "give [host]:port"},
		{in: "1.2.3.256:8404", err: "give [host]:port"},
		{in: "8404", err: "no :port"},
		{in: "", err: "no :port"},
		{in: ":0", err: "not 1-65535"},
		{in: ":65536", err: "not 1-65535"},
		{in: ":+1", err: "not 1-65535"},
		{in: ":8404-8405", err: "not 1-65535"},
		{in: "127.0.0.1:", err: "not 1-65535"},
	} {
		got, err := LBCheckAddr(tt.in)
		switch {
		case tt.err == "" && (err != nil || got != tt.want):
			t.Errorf("LBCheckAddr(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err) || got != ""):
			t.Errorf("LBCheckAddr(%q) = %q, %v; want an error with %q", tt.in, got, err, tt.err)
		}
	}
}
