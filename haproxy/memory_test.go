package haproxy

import (
	"slices"
	"testing"
)

// -m goes right after the binary, so that a "--" and the files after it
// stay last; a user's own -m wins; no limit adds nothing.
func TestWithMemoryLimit(t *testing.T) {
	cases := []struct {
		name string
		argv []string
		mb   int64
		want []string
	}{
		{"added after the binary", []string{"/usr/local/sbin/haproxy_wrapper", "-W", "-f", "/etc/haproxy/haproxy.cfg"}, 1365,
			[]string{"/usr/local/sbin/haproxy_wrapper", "-m", "1365", "-W", "-f", "/etc/haproxy/haproxy.cfg"}},
		{"before --", []string{"haproxy", "--", "/a.cfg"}, 10, []string{"haproxy", "-m", "10", "--", "/a.cfg"}},
		{"the user's -m wins", []string{"haproxy", "-m", "512", "-f", "/a.cfg"}, 1365, []string{"haproxy", "-m", "512", "-f", "/a.cfg"}},
		{"no limit", []string{"haproxy", "-f", "/a.cfg"}, 0, []string{"haproxy", "-f", "/a.cfg"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := slices.Clone(c.argv)
			got := WithMemoryLimit(in, c.mb)
			if !slices.Equal(got, c.want) {
				t.Errorf("WithMemoryLimit(%q, %d) = %q, want %q", c.argv, c.mb, got, c.want)
			}
			if !slices.Equal(in, c.argv) {
				t.Errorf("the caller's argv changed to %q", in)
			}
		})
	}
}

// The shares of gopherd's images: 66 % to HAProxy, 33 % to the controller,
// in MiB, rounded down.
func TestMemoryShare(t *testing.T) {
	cases := []struct {
		limit   int64
		percent int
		want    int64
	}{
		{2 << 30, 66, 1351}, // 2 GiB: 1417339207 bytes = 1351.67 MiB
		{2 << 30, 33, 675},
		{512 << 20, 100, 512},
		{0, 66, 0},
		{2 << 30, 0, 0},
	}
	for _, c := range cases {
		if got := MemoryShare(c.limit, c.percent); got != c.want {
			t.Errorf("MemoryShare(%d, %d) = %d, want %d", c.limit, c.percent, got, c.want)
		}
	}
}
