package routing

import (
	"bytes"
	"context"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/hapsuper/hapsuper/drain"

	"github.com/hapsuper/hapsuper/routing/judge"
)

// rawAnswerer is a stand-in for whatever listens on a node's port: it
// reads a request and writes answer on every connection, then closes it.
func rawAnswerer(t *testing.T, answer []byte) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
				buf := make([]byte, 512)
				_, _ = conn.Read(buf)
				_, _ = conn.Write(answer)
			}()
		}
	}()
	return ln.Addr().String()
}

// hugeAnswers are answers whose status line or headers run to ~79 KB,
// under the old shared 80 KiB budget; the bytes are ones that %q writes
// four times over (\x01).
var hugeAnswers = []struct{ name, answer string }{
	{"status line", "HTTP/1.1 2" + strings.Repeat("\x01", 79_000) + " OK\r\nContent-Length: 2\r\n\r\n{}"},
	{"status code", "HTTP/1.1 " + strings.Repeat("9", 79_000) + " OK\r\nContent-Length: 2\r\n\r\n{}"},
	{"header line", "HTTP/1.1 200 OK\r\n" + strings.Repeat("\x01", 79_000) + "\r\nContent-Length: 2\r\n\r\n{}"},
	{"many headers", "HTTP/1.1 200 OK\r\n" + strings.Repeat("X-A: "+strings.Repeat("\x01", 200)+"\r\n", 390) + "Content-Length: 2\r\n\r\n{}"},
}

// What a node's port answers is quoted into errors, the detail, the log and
// the status reply: a ~79 KB status line or header block gives an error of
// at most a few hundred bytes, and six such nodes a detail within
// judge.MaxDetail (it was 316 KB per error and 1.58 MB of detail).
func TestPeerTextBounded(t *testing.T) {
	for _, tc := range hugeAnswers {
		t.Run(tc.name, func(t *testing.T) {
			addr := rawAnswerer(t, []byte(tc.answer))
			c := newHealthzClient(func(ctx context.Context, network, _ string) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, network, addr)
			}, 10*time.Second)
			defer c.CloseIdleConnections()
			_, err := c.poll(t.Context(), "10.0.0.9:10256")
			if err == nil {
				t.Fatal("a 79 KB status line or header block was accepted")
			}
			msg := classify("10.0.0.9:10256", err, time.Second).Msg
			t.Logf("error: %d bytes", len(msg))
			if len(msg) > 400 || !utf8.ValidString(msg) {
				t.Errorf("error of %d bytes (valid UTF-8 %v), want at most 400: %.300q", len(msg), utf8.ValidString(msg), msg)
			}

			names := []string{"n2", "n3", "n4", "n5", "n6", "n7"}
			// A generous request timeout: the stand-ins answer at once, but a
			// loaded machine can take longer than the default to send 79 KB.
			s := newLateScenario(t, Config{Concurrency: 6, RequestTimeout: 10 * time.Second}, names...)
			for a := range s.routes {
				s.routes[a] = addr
			}
			got := s.round(time.Second)
			t.Logf("detail: %d bytes", len(got.Detail()))
			if got.State != drain.RoutingUnverified {
				t.Errorf("routing %s, want unverified", got.State)
			}
			if len(got.Detail()) > judge.MaxDetail || !strings.Contains(got.Detail(), "kube-proxy not observed on 6 of 6 nodes") {
				t.Errorf("detail of %d bytes, want at most %d naming the nodes: %.300q", len(got.Detail()), judge.MaxDetail, got.Detail())
			}
		})
	}
}

// The balancer's health check is asked with the same client: its answer in
// the detail is bounded the same way.
func TestPeerTextBoundedBalancer(t *testing.T) {
	s := newLBScenario(t, Config{LBHealthCheckWindow: time.Second}, nil)
	s.routes["10.0.0.1:31000"] = rawAnswerer(t, []byte(hugeAnswers[0].answer))
	got := s.round(0)
	expect(t, got, drain.RoutingPending, "not failing (no answer: ")
	if len(got.Detail()) > 1000 {
		t.Errorf("detail of %d bytes, want at most 1000: %.300q", len(got.Detail()), got.Detail())
	}
}

func TestClipPeer(t *testing.T) {
	for _, s := range []string{strings.Repeat("€", 100), "a" + strings.Repeat("€", 100), "ab" + strings.Repeat("€", 100), strings.Repeat("x", 199)} {
		got := clipPeer(s)
		if len(got) > maxQuoted+len("...") || !utf8.ValidString(got) {
			t.Errorf("clipPeer of %d bytes = %d bytes, valid %v", len(s), len(got), utf8.ValidString(got))
		}
		if len(s) <= maxQuoted && got != s {
			t.Errorf("clipPeer changed a short string")
		}
	}
}

// One poll of a node that sends a ~79 KB status line, or an endless one:
// the bytes it costs the process (allocated during the poll, error
// included; the stand-in allocates nothing while it writes) stay within a
// few times the head's limit.
func TestPeerTextPollAllocations(t *testing.T) {
	huge := []byte(hugeAnswers[0].answer)
	chunk := bytes.Repeat([]byte("a"), 32<<10)
	for _, tc := range []struct {
		name  string
		write func(net.Conn)
	}{
		{"79 KB status line", func(c net.Conn) { _, _ = c.Write(huge) }},
		{"endless status line", func(c net.Conn) {
			if _, err := c.Write(huge[:len("HTTP/1.1 200 ")]); err != nil {
				return
			}
			for range 2048 { // 64 MB at most
				if _, err := c.Write(chunk); err != nil {
					return
				}
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newHealthzClient(func(ctx context.Context, _, _ string) (net.Conn, error) {
				client, server := net.Pipe()
				go func() {
					defer server.Close()
					_ = server.SetDeadline(time.Now().Add(5 * time.Second))
					var buf [512]byte
					_, _ = server.Read(buf[:])
					tc.write(server)
				}()
				return client, nil
			}, time.Second)
			defer c.CloseIdleConnections()
			const polls = 20
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			var msgBytes int
			for range polls {
				_, err := c.poll(t.Context(), "10.0.0.9:10256")
				if err == nil {
					t.Fatal("answer accepted")
				}
				msgBytes += len(classify("10.0.0.9:10256", err, time.Second).Msg)
			}
			runtime.ReadMemStats(&after)
			perPoll := (after.TotalAlloc - before.TotalAlloc) / polls
			t.Logf("%s: %d KiB allocated per poll, error %d bytes", tc.name, perPoll>>10, msgBytes/polls)
			if perPoll > 6*maxHealthzHead {
				t.Errorf("%d bytes allocated per poll, want at most %d", perPoll, 6*maxHealthzHead)
			}
		})
	}
}
