package conf

import (
	"slices"
	"strings"
	"testing"
)

// With --companion the words after -- are the companion's, and HAProxy's
// command comes from --haproxy-command or is the default; without it the
// two sources of HAProxy's command exclude each other.
func TestParseCompanionArgs(t *testing.T) {
	for _, tc := range []struct {
		name          string
		args          []string
		env           map[string]string
		haproxy, comp []string
	}{
		{
			name:    "companion gets the words after --",
			args:    []string{"--companion", "/ctl", "--", "--with-s6-overlay", "--configmap=a/b"},
			haproxy: DefaultHAProxy,
			comp:    []string{"--with-s6-overlay", "--configmap=a/b"},
		},
		{
			name:    "haproxy command from the environment",
			args:    []string{"--", "--x"},
			env:     map[string]string{"HAPSUPER_COMPANION": "/ctl", "HAPSUPER_HAPROXY_COMMAND": "/usr/sbin/haproxy_wrapper -W  -f /etc/haproxy/haproxy.cfg"},
			haproxy: []string{"/usr/sbin/haproxy_wrapper", "-W", "-f", "/etc/haproxy/haproxy.cfg"},
			comp:    []string{"--x"},
		},
		{
			name:    "haproxy command without a companion",
			args:    []string{"--haproxy-command", "haproxy -f /a.cfg"},
			haproxy: []string{"haproxy", "-f", "/a.cfg"},
		},
		{
			name:    "companion with no --",
			args:    []string{"--companion", "/ctl"},
			haproxy: DefaultHAProxy,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Parse(tc.args, env(tc.env))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(s.HAProxy, tc.haproxy) || !slices.Equal(s.CompanionArgs, tc.comp) {
				t.Errorf("HAProxy %q, companion args %q; want %q, %q", s.HAProxy, s.CompanionArgs, tc.haproxy, tc.comp)
			}
		})
	}
}

func TestParseCompanionErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--haproxy-command", "haproxy", "--", "haproxy"}, "drop one"},
		{[]string{"--haproxy-command", "  "}, "has no words"},
		{[]string{"--companion-kill-delay", "2s"}, "without --companion"},
		{[]string{"--companion", "/c", "--companion-kill-delay", "0s"}, "more than 0"},
		{[]string{"--companion", "/c", "--companion-kill-delay", "17s"}, "never end quiet"},
		{[]string{"--companion", "/c", "--companion-restart-backoff", "1ms"}, "busy loop"},
		{[]string{"--companion", "/c", "--companion-restart-backoff", "2s", "--companion-restart-backoff-max", "1s"}, "at least the first delay"},
	} {
		_, err := Parse(tc.args, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%q) = %v; want an error saying %q", tc.args, err, tc.want)
		}
	}
}
