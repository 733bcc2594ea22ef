package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// kube-proxy's sync lines are read with their elapsed time in any unit;
// other lines are not; the paragraph counts the syncs longer than D.
func TestSyncDurations(t *testing.T) {
	log := filepath.Join(t.TempDir(), "kube-proxy-node1.log")
	body := `I1206 06:17:37.071409   13944 proxier.go:1200] "SyncProxyRules complete" ipFamily="IPv4" elapsed="329.336864ms"
I1206 06:17:37.148404   13944 proxier.go:1200] "SyncProxyRules complete" ipFamily="IPv4" elapsed="75.875048ms"
I1206 06:17:37.200000   13944 proxier.go:900] "Syncing nftables rules"
I1206 06:17:38.338556   13944 proxier.go:1200] "SyncProxyRules complete" ipFamily="IPv6" elapsed="1.5s"
I1206 06:17:39.338556   13944 proxier.go:1200] "SyncProxyRules complete" ipFamily="IPv6" elapsed="900µs"
`
	if err := os.WriteFile(log, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	ds, err := syncDurations([]string{log})
	if err != nil {
		t.Fatal(err)
	}
	want := []time.Duration{329336864, 75875048, 1500 * time.Millisecond, 900 * time.Microsecond}
	if len(ds) != len(want) {
		t.Fatalf("read %v, want %v", ds, want)
	}
	for i := range want {
		if ds[i] != want[i] {
			t.Fatalf("read %v, want %v", ds, want)
		}
	}
	p := syncParagraph(ds)
	for _, w := range []string{": 4, median 329ms", "max 1.5s", "2 (50.0 %) took longer than the sync allowance D (250ms"} {
		if !strings.Contains(p, w) {
			t.Errorf("paragraph lacks %q:\n%s", w, p)
		}
	}
	if _, err := syncDurations([]string{filepath.Join(t.TempDir(), "none.log")}); err == nil {
		t.Error("a missing log read without an error")
	}
}
