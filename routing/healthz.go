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

	"github.com/hapsuper/hapsuper/routing/judge"
)

// errNoFamilyStatus marks an answer without per-family status: kube-proxy
// before 1.33, or something else that looks like it.
var errNoFamilyStatus = errors.New("no per-family status (kube-proxy older than 1.33?)")

// parseHealthz reads a kube-proxy healthz body.
func parseHealthz(body []byte) (judge.Healthz, error) {
	var raw struct {
		CurrentTime *time.Time `json:"currentTime"`
		Status      map[string]struct {
			LastUpdated *time.Time `json:"lastUpdated"`
			Healthy     *bool      `json:"healthy"`
		} `json:"status"`
	}
	if err := json.Unmarshal(body, &raw); err != nil {
		return judge.Healthz{}, fmt.Errorf("not kube-proxy healthz: %w", err)
	}
	if raw.CurrentTime == nil || raw.CurrentTime.IsZero() {
		return judge.Healthz{}, errors.New("not kube-proxy healthz: no currentTime")
	}
	h := judge.Healthz{CurrentTime: *raw.CurrentTime, Families: map[discovery.AddressType]judge.FamilyHealth{}}
	for name, s := range raw.Status {
		fam := discovery.AddressType(name)
		if fam != discovery.AddressTypeIPv4 && fam != discovery.AddressTypeIPv6 {
			continue
		}
		if s.LastUpdated == nil || s.LastUpdated.IsZero() || s.Healthy == nil {
			return judge.Healthz{}, fmt.Errorf("not kube-proxy healthz: incomplete %s status", name)
		}
		if s.LastUpdated.After(h.CurrentTime) {
			return judge.Healthz{}, fmt.Errorf("not kube-proxy healthz: %s lastUpdated after currentTime", name)
		}
		h.Families[fam] = judge.FamilyHealth{LastUpdated: *s.LastUpdated, Healthy: *s.Healthy}
	}
	if len(h.Families) == 0 {
		return judge.Healthz{}, errNoFamilyStatus
	}
	h.Proxy = judge.ProxyKubeProxy
	return h, nil
}

// maxHealthzBody bounds what is read of an answer; kube-proxy's is ~300 bytes.
const maxHealthzBody = 64 << 10

// dialError marks a failure to connect, as opposed to one after connecting.
type dialError struct{ err error }

func (e *dialError) Error() string { return e.err.Error() }
func (e *dialError) Unwrap() error { return e.err }

// dialFunc opens a connection; the real one is a net.Dialer's.
type dialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// fetch asks one node's kube-proxy, within timeout. sent and received
// bracket the exchange in the client's clock (sent is an earlier poll's, when this
// one read the answer to that poll's timed-out request); via says how the
// answer came: on a connection that had carried one before (the same
// kube-proxy process), or on a new one because the node had closed that
// connection (possibly a new process). A nil error with ctx ended is not
// returned: the caller checks ctx. h.Proxy names what answered: the answer
// of an emulation whose lastUpdated is no sync (Cilium, OVN-Kubernetes)
// comes with a nil error and no families, for the judgement to refuse.
func (c *healthzClient) fetch(ctx context.Context, addr string, timeout time.Duration) (h judge.Healthz, sent, received time.Time, via answer, err error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	sent = c.now()
	a, err := c.poll(ctx, addr)
	if err != nil {
		return judge.Healthz{}, sent, received, answer{}, classify(addr, err, timeout)
	}
	received = c.now()
	if !a.sent.IsZero() {
		sent = a.sent
	}
	status, body := a.status, a.body
	via = answer{kept: a.kept, reconnected: a.reconnected}
	// kube-proxy answers 503 with the same body when unhealthy or when its
	// node is being deleted: the per-family status still holds.
	if status != http.StatusOK && status != http.StatusServiceUnavailable {
		return judge.Healthz{}, sent, received, via, &judge.PollError{Msg: fmt.Sprintf("healthz at %s answered HTTP %d: not kube-proxy", addr, status)}
	}
	h, err = parseHealthz(body)
	if err != nil {
		if e, ok := parseEmulated(status, body); ok {
			return e, sent, received, via, nil
		}
		// encoding/json and time quote the body's keys and values.
		pe := &judge.PollError{Msg: fmt.Sprintf("healthz at %s: %s", addr, clipPeer(err.Error()))}
		if errors.Is(err, errNoFamilyStatus) {
			pe.Proxy = judge.ProxyKubeProxyOld
			pe.Msg = fmt.Sprintf("healthz at %s answers as %s: %s", addr, pe.Proxy, pe.Proxy.Why())
		}
		return judge.Healthz{}, sent, received, via, pe
	}
	return h, sent, received, via, nil
}

// classify sorts a transport error: no connection → unverified; connected,
// then silent until the timeout → pending; anything else → unverified.
func classify(addr string, err error, timeout time.Duration) *judge.PollError {
	var de *dialError
	if errors.As(err, &de) {
		return &judge.PollError{Msg: fmt.Sprintf("healthz at %s unreachable: %v", addr, de.err)}
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return &judge.PollError{Pending: true, Msg: fmt.Sprintf("healthz at %s accepted but did not answer within %v", addr, timeout)}
	}
	return &judge.PollError{Msg: fmt.Sprintf("healthz at %s failed: %v", addr, err)}
}
