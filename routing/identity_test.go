package routing

import (
	"strings"
	"testing"
)

func TestIdentityFromEnv(t *testing.T) {
	full := map[string]string{
		"POD_NAME": "web-0", "POD_NAMESPACE": "default", "NODE_NAME": "n1", "POD_IPS": "10.0.0.5, fd00::5",
	}
	tests := []struct {
		name    string
		env     map[string]string
		want    []string // error substrings; nil means no error
		wantIPs []string
	}{
		{name: "dual-stack", env: full, wantIPs: []string{"10.0.0.5", "fd00::5"}},
		{name: "missing two", env: map[string]string{"POD_NAME": "web-0", "POD_IPS": "10.0.0.5"},
			want: []string{"POD_NAMESPACE (valueFrom.fieldRef.fieldPath: metadata.namespace)", "NODE_NAME (valueFrom.fieldRef.fieldPath: spec.nodeName)", "downward API"}},
		{name: "blank IPs", env: with(full, "POD_IPS", " , "), want: []string{"no pod IP"}},
		{name: "bad IP", env: with(full, "POD_IPS", "10.0.0.5,not-an-ip"), want: []string{`"not-an-ip"`, "POD_IPS"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id, err := IdentityFromEnv(func(k string) string { return tt.env[k] })
			if tt.want == nil {
				if err != nil {
					t.Fatalf("IdentityFromEnv: %v", err)
				}
				if strings.Join(id.PodIPs, ",") != strings.Join(tt.wantIPs, ",") || id.PodName != "web-0" || id.NodeName != "n1" {
					t.Fatalf("identity = %+v", id)
				}
				return
			}
			if err == nil {
				t.Fatalf("IdentityFromEnv = %+v, want an error", id)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

func with(m map[string]string, k, v string) map[string]string {
	out := map[string]string{}
	for a, b := range m {
		out[a] = b
	}
	out[k] = v
	return out
}

func TestConfigValidate(t *testing.T) {
	id := Identity{PodName: "web-0", Namespace: "default", NodeName: "n1", PodIPs: []string{"10.0.0.5"}}
	tests := []struct {
		name string
		cfg  Config
		want string // "" = valid
	}{
		{"defaults", Config{Mode: ModeKubeProxy, Identity: id}, ""},
		{"off needs nothing", Config{}, ""},
		{"unknown mode", Config{Mode: "ipvs", Identity: id}, "unknown mode"},
		{"no identity", Config{Mode: ModeEndpointSlices}, "no pod name"},
		{"lag and allowance beyond min sync", Config{Mode: ModeKubeProxy, Identity: id, SyncAllowance: 950 * ms}, "exceed min sync period"},
		{"lag off", Config{Mode: ModeKubeProxy, Identity: id, WatchLag: -1, SyncAllowance: 1000 * ms}, ""},
		{"zero concurrency is the default", Config{Mode: ModeKubeProxy, Identity: id, Concurrency: 0}, ""},
		{"negative concurrency", Config{Mode: ModeKubeProxy, Identity: id, Concurrency: -1}, "concurrency"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.withDefaults().validate()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("validate: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("validate = %v, want %q", err, tt.want)
			}
		})
	}
}
