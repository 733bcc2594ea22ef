package routing

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	discovery "k8s.io/api/discovery/v1"
)

// healthz is what the confirmation reads of kube-proxy's /healthz answer:
//
//	{"lastUpdated":…,"currentTime":…,"nodeEligible":true,"healthy":true,
//	 "status":{"IPv4":{"lastUpdated":…,"healthy":true}}}
//
// The top-level lastUpdated is ignored: kube-proxy sets it to the current
// time whenever it is healthy. Per family, lastUpdated is the completion of
// the last successful rule sync (kube-proxy ≥ 1.33), in the node's clock.
type healthz struct {
	currentTime time.Time // node clock
	families    map[discovery.AddressType]familyHealth
}

type familyHealth struct {
	lastUpdated time.Time // node clock
	healthy     bool      // false: a change has waited longer than kube-proxy's healthz timeout
}

// errNoFamilyStatus marks an answer without per-family status: kube-proxy
// before 1.33, or something else that looks like it.
var errNoFamilyStatus = errors.New("no per-family status (kube-proxy older than 1.33?)")

// parseHealthz reads a kube-proxy healthz body.
func parseHealthz(body []byte) (healthz, error) {
	var raw struct {
		CurrentTime *time.Time `json:"currentTime"`
		Status      map[string]struct {
			LastUpdated *time.Time `json:"lastUpdated"`
			Healthy     *bool      `json:"healthy"`
		} `json:"status"`
	}
	if err := json.Unmarshal(body, &raw); err != nil {
		return healthz{}, fmt.Errorf("not kube-proxy healthz: %w", err)
	}
	if raw.CurrentTime == nil || raw.CurrentTime.IsZero() {
		return healthz{}, errors.New("not kube-proxy healthz: no currentTime")
	}
	h := healthz{currentTime: *raw.CurrentTime, families: map[discovery.AddressType]familyHealth{}}
	for name, s := range raw.Status {
		fam := discovery.AddressType(name)
		if fam != discovery.AddressTypeIPv4 && fam != discovery.AddressTypeIPv6 {
			continue
		}
		if s.LastUpdated == nil || s.LastUpdated.IsZero() || s.Healthy == nil {
			return healthz{}, fmt.Errorf("not kube-proxy healthz: incomplete %s status", name)
		}
		if s.LastUpdated.After(h.currentTime) {
			return healthz{}, fmt.Errorf("not kube-proxy healthz: %s lastUpdated after currentTime", name)
		}
		h.families[fam] = familyHealth{lastUpdated: *s.LastUpdated, healthy: *s.Healthy}
	}
	if len(h.families) == 0 {
		return healthz{}, errNoFamilyStatus
	}
	return h, nil
}

// maxHealthzBody bounds what is read of an answer; kube-proxy's is ~300 bytes.
const maxHealthzBody = 64 << 10

// pollError is why a node's healthz could not be read, and whether that
// leaves the node pending (it accepted and did not answer: kube-proxy may be
// frozen with stale rules) or unverified (nothing there speaks healthz).
type pollError struct {
	pending bool
	msg     string
}

func (e *pollError) Error() string { return e.msg }

// dialError marks a failure to connect, as opposed to one after connecting.
type dialError struct{ err error }

func (e *dialError) Error() string { return e.err.Error() }
func (e *dialError) Unwrap() error { return e.err }

// dialFunc opens a connection; the real one is a net.Dialer's.
type dialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// fetchHealthz asks one node's kube-proxy. sent and received bracket the
// exchange in the observer's clock (sent is an earlier poll's, when this
// one read the answer to that poll's timed-out request); via says how the
// answer came: on a connection that had carried one before (the same
// kube-proxy process), or on a new one because the node had closed that
// connection (possibly a new process). A nil error with ctx ended is not
// returned: the caller checks ctx.
func (o *Observer) fetchHealthz(ctx context.Context, addr string) (h healthz, sent, received time.Time, via answer, err error) {
	ctx, cancel := context.WithTimeout(ctx, o.cfg.RequestTimeout)
	defer cancel()
	sent = o.clock.Now()
	a, err := o.http.poll(ctx, addr)
	if err != nil {
		return healthz{}, sent, received, answer{}, classify(addr, err, o.cfg.RequestTimeout)
	}
	received = o.clock.Now()
	if !a.sent.IsZero() {
		sent = a.sent
	}
	status, body := a.status, a.body
	via = answer{kept: a.kept, reconnected: a.reconnected}
	// kube-proxy answers 503 with the same body when unhealthy or when its
	// node is being deleted: the per-family status still holds.
	if status != http.StatusOK && status != http.StatusServiceUnavailable {
		return healthz{}, sent, received, via, &pollError{msg: fmt.Sprintf("healthz at %s answered HTTP %d: not kube-proxy", addr, status)}
	}
	h, err = parseHealthz(body)
	if err != nil {
		// encoding/json and time quote the body's keys and values.
		return healthz{}, sent, received, via, &pollError{msg: fmt.Sprintf("healthz at %s: %s", addr, clipPeer(err.Error()))}
	}
	return h, sent, received, via, nil
}

// classify sorts a transport error: no connection → unverified; connected,
// then silent until the timeout → pending; anything else → unverified.
func classify(addr string, err error, timeout time.Duration) *pollError {
	var de *dialError
	if errors.As(err, &de) {
		return &pollError{msg: fmt.Sprintf("healthz at %s unreachable: %v", addr, de.err)}
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return &pollError{pending: true, msg: fmt.Sprintf("healthz at %s accepted but did not answer within %v", addr, timeout)}
	}
	return &pollError{msg: fmt.Sprintf("healthz at %s failed: %v", addr, err)}
}
