package conf

import (
	"log/slog"
	"testing"
)

// The settings as logged name every run flag once, with its value as the
// flag set reads it, and the HAProxy command; the withdrawn quiet period,
// unset, logs its rule rather than 0s.
func TestSettingsLogEveryFlag(t *testing.T) {
	s := defaults()
	s.LBCheckThreshold = 3
	s.HAProxy = []string{"haproxy", "-f", "/etc/haproxy/haproxy.cfg"}
	got := map[string]slog.Value{}
	for _, a := range s.LogValue().Group() {
		if _, dup := got[a.Key]; dup {
			t.Errorf("%s logged twice", a.Key)
		}
		got[a.Key] = a.Value
	}
	for _, f := range RunFlags() {
		if _, ok := got[f.Name]; !ok {
			t.Errorf("--%s is not in the logged settings", f.Name)
		}
	}
	if len(got) != len(RunFlags())+1 {
		t.Errorf("%d settings logged, want the %d run flags and the command", len(got), len(RunFlags()))
	}
	if v := got["lb-check-threshold"]; v.Kind() != slog.KindInt64 || v.Int64() != 3 {
		t.Errorf("lb-check-threshold logged as %v (%v), want the number 3", v, v.Kind())
	}
	if v := got["grace-period"].String(); v != s.GracePeriod.String() {
		t.Errorf("grace-period logged as %q, want %q", v, s.GracePeriod)
	}
	if v := got["withdrawn-quiet-period"].String(); v != s.WithdrawnQuietText() {
		t.Errorf("withdrawn-quiet-period logged as %q, want %q", v, s.WithdrawnQuietText())
	}
	if v := got["haproxy"].String(); v != "haproxy -f /etc/haproxy/haproxy.cfg" {
		t.Errorf("haproxy logged as %q", v)
	}
}
