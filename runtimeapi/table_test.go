package runtimeapi

import (
	"errors"
	"strings"
	"testing"
)

func TestParseShowTable(t *testing.T) {
	for _, tt := range []struct {
		name, out string
		want      []TableEntry
		err       string
	}{
		{"2.6", "# table: hapsuper-lb-check, type: ipv6, size:1024, used:2\n" +
			"0x55fe499030c0: key=::ffff:127.0.0.1 use=0 exp=597203 http_req_cnt=2 http_req_rate(120000)=2\n" +
			"0x55fe499031c0: key=::ffff:10.0.0.5 use=1 exp=1000 http_req_cnt=17 http_req_rate(120000)=0\n",
			[]TableEntry{{"::ffff:127.0.0.1", 2, 2}, {"::ffff:10.0.0.5", 17, 0}}, ""},
		{"3.x shard", "# table: hapsuper-lb-check, type: ipv6, size:1024, used:1\n" +
			"0x7f: key=::ffff:127.0.0.1 use=0 exp=599992 shard=0 http_req_cnt=3 http_req_rate(120000)=3\n",
			[]TableEntry{{"::ffff:127.0.0.1", 3, 3}}, ""},
		{"empty", "# table: hapsuper-lb-check, type: ipv6, size:1024, used:0\n", nil, ""},
		{"no such table", "No such table\n", nil, "No such table"},
		{"another table", "# table: other, type: ip, size:10, used:0\n", nil, "want # table: hapsuper-lb-check"},
		{"bad count", "# table: hapsuper-lb-check, type: ipv6, size:1024, used:1\n0x1: key=a http_req_cnt=x\n", nil, "http_req_cnt"},
		{"no key", "# table: hapsuper-lb-check, type: ipv6, size:1024, used:1\n0x1: use=0 http_req_cnt=1\n", nil, "without key"},
		{"long line", "# table: hapsuper-lb-check, type: ipv6, size:1024, used:1\n" + strings.Repeat("x", 5000) + "\n", nil, "unexpected table line"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseShowTable(tt.out, "hapsuper-lb-check")
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) || !errors.Is(err, ErrCLI) || len(err.Error()) > 2048 {
					t.Fatalf("error %v, want one wrapping ErrCLI saying %q", err, tt.err)
				}
				return
			}
			if err != nil || len(got) != len(tt.want) {
				t.Fatalf("got %+v, %v; want %+v", got, err, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("entry %d: %+v, want %+v", i, got[i], tt.want[i])
				}
			}
		})
	}
}
