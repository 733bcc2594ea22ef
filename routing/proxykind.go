package routing

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/hapsuper/hapsuper/routing/judge"
)

// goTimeLayout is a time.Time as Go's %q prints it (its String method),
// without the monotonic clock reading (" m=+3421.004512311") that follows
// it when the time came from time.Now.
const goTimeLayout = "2006-01-02 15:04:05.999999999 -0700 MST"

// parseEmulated reads the healthz answer of a kube-proxy emulation:
// Cilium's kube-proxy replacement (--kube-proxy-replacement-healthz-bind-address)
// and OVN-Kubernetes' node healthz server both write
//
//	{"lastUpdated": "2026-03-02 10:00:07.412309871 +0000 UTC m=+3421.004512311","currentTime": "…"}
//
// with 200, or 503 when unhealthy (Cilium: its agent; OVN-Kubernetes: its
// own pod terminating). No per-family status: their lastUpdated is the
// current time (Cilium, healthy), the last service update (Cilium,
// unhealthy), or OVN-Kubernetes' last check of its own pod, at most 500 ms
// old — never a rule sync. ok is false for anything else.
func parseEmulated(status int, body []byte) (h judge.Healthz, ok bool) {
	if status != http.StatusOK && status != http.StatusServiceUnavailable {
		return judge.Healthz{}, false
	}
	var raw map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&raw); err != nil || dec.More() || len(raw) != 2 {
		return judge.Healthz{}, false
	}
	var last, now string
	if json.Unmarshal(raw["lastUpdated"], &last) != nil || json.Unmarshal(raw["currentTime"], &now) != nil {
		return judge.Healthz{}, false
	}
	lastT, ok1 := parseGoTime(last)
	nowT, ok2 := parseGoTime(now)
	if !ok1 || !ok2 || nowT.IsZero() || lastT.After(nowT) {
		return judge.Healthz{}, false
	}
	h = judge.Healthz{CurrentTime: nowT, Proxy: judge.ProxyEmulated}
	if status == http.StatusOK && last != now {
		// Cilium's healthy answer prints one reading twice; OVN-Kubernetes
		// prints when it last looked at its pod, and now.
		h.Proxy = judge.ProxyOVN
	}
	return h, true
}

// parseGoTime reads a time printed by Go's %q.
func parseGoTime(s string) (time.Time, bool) {
	if i := strings.Index(s, " m="); i >= 0 {
		s = s[:i]
	}
	t, err := time.Parse(goTimeLayout, s)
	return t, err == nil
}
