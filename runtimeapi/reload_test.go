package runtimeapi

import (
	"errors"
	"strings"
	"testing"
)

func TestParseReload(t *testing.T) {
	// 2.6 answers nothing; 2.7 and later Success=1|0, "--", the startup
	// logs and an empty line (captured from 3.0).
	for _, tc := range []struct {
		name    string
		reply   string
		wantIs  error
		wantMsg string
	}{
		{"2.6 answers nothing", fixture(t, "reload.txt"), nil, ""},
		{"3.0 success", fixture30(t, "reload.txt"), nil, ""},
		{"3.0 failure", fixture30(t, "reload-failed.txt"), ErrReloadFailed, "bogus_keyword"},
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
