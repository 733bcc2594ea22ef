package routing

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	discovery "k8s.io/api/discovery/v1"
)

// The fixtures follow kube-proxy 1.37's ProxyHealth JSON
// (pkg/proxy/healthcheck/proxy_health.go), as its healthz writes it.
func TestParseHealthz(t *testing.T) {
	type fam struct {
		age     time.Duration // currentTime − lastUpdated
		healthy bool
	}
	tests := []struct {
		file    string
		want    map[discovery.AddressType]fam
		wantErr string
	}{
		{file: "healthy-ipv4.json", want: map[discovery.AddressType]fam{"IPv4": {2292265553, true}}},
		{file: "dual-stack.json", want: map[discovery.AddressType]fam{"IPv4": {2250 * ms, true}, "IPv6": {2239 * ms, true}}},
		{file: "unhealthy-ipv6.json", want: map[discovery.AddressType]fam{"IPv4": {182250 * ms, true}, "IPv6": {182239 * ms, false}}},
		{file: "node-ineligible.json", want: map[discovery.AddressType]fam{"IPv4": {2250 * ms, true}}},
		{file: "pre-1.33.json", wantErr: "no per-family status"},
		{file: "starting.json", wantErr: "no per-family status"},
		{file: "kubelet-style.txt", wantErr: "not kube-proxy healthz"},
		{file: "html.txt", wantErr: "not kube-proxy healthz"},
		{file: "future-sync.json", wantErr: "lastUpdated after currentTime"},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			body, err := os.ReadFile(filepath.Join("testdata", "healthz", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			h, err := parseHealthz(body)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("parseHealthz = %+v, %v; want error %q", h, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseHealthz: %v", err)
			}
			if len(h.Families) != len(tt.want) {
				t.Fatalf("families = %+v, want %v", h.Families, tt.want)
			}
			for f, w := range tt.want {
				g := h.Families[f]
				if age := h.CurrentTime.Sub(g.LastUpdated); age != w.age || g.Healthy != w.healthy {
					t.Errorf("%s: age %v healthy %v, want %v %v", f, age, g.Healthy, w.age, w.healthy)
				}
			}
		})
	}
}

func TestParseHealthzNoStatusIsDistinct(t *testing.T) {
	_, err := parseHealthz([]byte(`{"currentTime":"2026-03-02T10:00:07.5Z","status":{}}`))
	if !errors.Is(err, errNoFamilyStatus) {
		t.Fatalf("err = %v, want errNoFamilyStatus", err)
	}
}

// FuzzParseHealthz: any body either fails or yields families whose sync is
// not after the node's current time.
func FuzzParseHealthz(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "healthz", "*"))
	for _, file := range files {
		if b, err := os.ReadFile(file); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte(`{"currentTime":"2026-03-02T10:00:07Z","status":{"IPv4":{"lastUpdated":"2026-03-02T10:00:07Z"}}}`))
	f.Add([]byte(`{"currentTime":null,"status":{"IPv4":null}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		h, err := parseHealthz(body)
		if err != nil {
			return
		}
		if h.CurrentTime.IsZero() || len(h.Families) == 0 {
			t.Fatalf("accepted %q as %+v", body, h)
		}
		for fam, s := range h.Families {
			if fam != discovery.AddressTypeIPv4 && fam != discovery.AddressTypeIPv6 {
				t.Fatalf("family %q accepted", fam)
			}
			if s.LastUpdated.IsZero() || s.LastUpdated.After(h.CurrentTime) {
				t.Fatalf("accepted %q with lastUpdated %v, currentTime %v", body, s.LastUpdated, h.CurrentTime)
			}
		}
	})
}
