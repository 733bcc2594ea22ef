package k8stest

import (
	"os"
	"testing"
	"time"
)

func TestParseHealthz(t *testing.T) {
	healthy, err := os.ReadFile("testdata/healthz-nftables-healthy.json") // kube-proxy 1.37.2, nftables mode
	if err != nil {
		t.Fatal(err)
	}
	mustTime := func(s string) time.Time {
		tm, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return tm
	}
	tests := []struct {
		name     string
		status   int
		body     []byte
		wantErr  bool
		wantIPv4 time.Time
		wantOK   bool
	}{
		{name: "healthy", status: 200, body: healthy,
			wantIPv4: mustTime("2026-11-29T20:50:11.303540021Z"), wantOK: true},
		{name: "not JSON", status: 200, body: []byte("ok"), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hz, err := parseHealthz(tt.status, tt.body)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("parseHealthz(%q) = %+v, want an error", tt.body, hz)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if hz.StatusCode != tt.status || hz.Healthy != tt.wantOK {
				t.Errorf("status %d healthy %v, want %d %v", hz.StatusCode, hz.Healthy, tt.status, tt.wantOK)
			}
			if got := hz.Status["IPv4"].LastUpdated; !got.Equal(tt.wantIPv4) {
				t.Errorf("IPv4 lastUpdated %v, want %v", got, tt.wantIPv4)
			}
			if hz.NodeEligible == nil || !*hz.NodeEligible {
				t.Errorf("nodeEligible %v, want true", hz.NodeEligible)
			}
		})
	}
}
