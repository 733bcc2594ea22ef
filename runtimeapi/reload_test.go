package runtimeapi

import (
	"errors"
	"strings"
	"testing"
)

func TestParseReload(t *testing.T) {
	// The 2.7+ answers follow the format HAProxy's management guide gives for
	// "reload" (Success=1|0, "--", startup logs); they were not captured (no
	// 2.7+ HAProxy here) and should be replaced by a 3.0 capture. The 2.6
	// answer is captured.
	success27 := "Success=1\n--\n[NOTICE]   (482713) : haproxy version is 2.7.0\n[NOTICE]   (482713) : path to executable is /usr/sbin/haproxy\n"
	failure27 := "Success=0\n--\n[ALERT]    (482713) : config : parsing [cfg:28] : unknown keyword 'bogus_keyword' in 'frontend' section\n"
	for _, tc := range []struct {
		name    string
		reply   string
		wantIs  error
		wantMsg string
	}{
		{"2.6 answers nothing", fixture(t, "reload.txt"), nil, ""},
		{"2.7 success", success27, nil, ""},
		{"2.7 failure", failure27, ErrReloadFailed, "bogus_keyword"},
		{"unknown command", fixture(t, "error-unknown-master.txt"), ErrCLI, "Unknown command"},
		{"garbage", "Success=maybe\n", ErrCLI, "Success=maybe"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := parseReload(tc.reply)
			if tc.wantIs == nil {
				if err != nil {
					t.Fatalf("parseReload = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, tc.wantIs) || !strings.Contains(err.Error(), tc.wantMsg) {
				t.Fatalf("parseReload = %v; want %v saying %q", err, tc.wantIs, tc.wantMsg)
			}
		})
	}
}
