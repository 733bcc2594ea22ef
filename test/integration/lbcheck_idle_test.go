package integration

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A second balancer that checked the pod before, but not in the two
// minutes before the stop, checks again during the drain: its address is
// in the check's stick table with no rate at the stop (put there with `set
// table`, as two minutes of silence would leave it), then sends three
// checks from 127.0.0.2 a second apart from 1 s after the stop. A
// balancer checking throughout (127.0.0.1, every 500 ms, down after 3)
// reaches the threshold first; the drain must still wait for the
// returning address's third failed check, and its detail names both.
func TestLBCheck_IdleAddressChecksAgain(t *testing.T) {
	eachHAProxy(t, func(t *testing.T, h haproxyVersion) {
		cfg := newConfig(t)
		check := fmt.Sprintf("127.0.0.1:%d", freePort(t))
		s := serve(t, h, cfg, append(roomy.flags(), "--lb-check-bind", check, "--lb-check-threshold", "3")...)
		other := startBackend(t)
		lb := startBalancer(t, h, cfg.webAddr(), check, other.addr)

		const idle = "::ffff:127.0.0.2"
		if out, err := masterCommand(s.master, "@1 set table hapsuper-lb-check key "+idle+" data.http_req_cnt 1"); err != nil {
			t.Fatalf("set table: %v (%q)", err, out)
		}
		if out, err := masterCommand(s.master, "@1 show table hapsuper-lb-check key "+idle); err != nil || !strings.Contains(out, "http_req_cnt=1") || !strings.Contains(out, "http_req_rate(120000)=0") {
			t.Fatalf("the idle address is not in the table with no rate: %v\n%s", err, out)
		}

		term := s.signal(syscall.SIGTERM)
		var last time.Time // when the returning address's last check was sent: it counts once HAProxy has it
		client := idleChecker(t)
		for i := 1; i <= 3; i++ {
			time.Sleep(time.Until(term.Add(time.Duration(i) * time.Second)))
			last = time.Now()
			resp, err := client.Get("http://" + check + "/")
			if err != nil { // refused: the drain ended and the soft stop closed the listeners
				t.Errorf("check %d from 127.0.0.2: %v", i, err)
				break
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusServiceUnavailable {
				t.Errorf("check %d from 127.0.0.2 answered %d after the stop, want 503", i, resp.StatusCode)
			}
		}
		ended := s.waitLog("drain ended", 15*time.Second)
		code, _ := s.waitExit(10 * time.Second)
		t.Logf("balancer marked the pod down +%v; the returning address's last check sent +%v; drain ended +%v (%s: %s)",
			lb.DownAt("pod").Sub(term).Round(time.Millisecond), last.Sub(term).Round(time.Millisecond),
			ended.At.Sub(term).Round(time.Millisecond), ended.Str("reason"), ended.Str("detail"))
		if ended.At.Before(last) {
			t.Errorf("drain ended %v before the returning address's last check was sent", last.Sub(ended.At).Round(time.Millisecond))
		}
		for _, want := range []string{"(threshold 3): 127.0.0.1 ", ", 127.0.0.2 3"} {
			if !strings.Contains(ended.Str("detail"), want) {
				t.Errorf("drain detail %q does not say %q", ended.Str("detail"), want)
			}
		}
		s.checkClean(code)
	})
}

// idleChecker is an HTTP client whose connections come from 127.0.0.2, one
// per request.
func idleChecker(t *testing.T) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}, Timeout: 2 * time.Second}
	tr := &http.Transport{DisableKeepAlives: true, DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		return d.DialContext(ctx, network, addr)
	}}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 2 * time.Second}
}
