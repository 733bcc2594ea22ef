package routing

import (
	"context"
	"net"
	"runtime"
	"testing"
	"time"
)

// FuzzHealthzExchange sends whatever a node's :10256 might answer (kube-
// proxy, a replacement, a hostile listener) to the healthz client's own
// HTTP/1.1 exchange: it must never panic, never take longer than its
// timeout, never return more than maxHealthzBody of body, and keep the
// connection only after an answer it read to its end.
func FuzzHealthzExchange(f *testing.F) {
	f.Add([]byte("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 17\r\n\r\n{\"healthy\": true}"))
	f.Add([]byte("HTTP/1.1 503 Service Unavailable\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"))
	f.Add([]byte("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nbody until close"))
	f.Add([]byte("HTTP/1.0 200\r\n\r\n"))
	f.Add([]byte("SSH-2.0-OpenSSH_9.2\r\n"))
	f.Add([]byte("HTTP/1.1 200 OK\r\nContent-Length: 99999999\r\n\r\nshort"))
	f.Fuzz(func(t *testing.T, answer []byte) {
		c := newHealthzClient(func(ctx context.Context, _, _ string) (net.Conn, error) {
			client, server := net.Pipe()
			go func() {
				defer server.Close()
				buf := make([]byte, 512)
				_, _ = server.Read(buf) // the request
				_ = server.SetWriteDeadline(time.Now().Add(2 * time.Second))
				_, _ = server.Write(answer)
			}()
			return client, nil
		}, time.Second)
		defer c.CloseIdleConnections()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		start := time.Now()
		status, body, err := c.get(ctx, "10.0.0.9:10256")
		if took := time.Since(start); took > 3*time.Second {
			t.Fatalf("exchange took %s, timeout 1s", took)
		}
		if len(body) > maxHealthzBody {
			t.Fatalf("body of %d bytes, limit %d", len(body), maxHealthzBody)
		}
		if err != nil && (status != 0 || body != nil) {
			t.Fatalf("error %v with status %d and a body", err, status)
		}
	})
}

// A hostile listener sending an endless status line costs the client a
// bounded amount of memory: measured as the heap allocated during the
// exchange, it stays within a few times maxHealthzAnswer (it was 600 MB
// before the bound).
func TestHealthzClientEndlessAnswerMemory(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		_, _ = conn.Write([]byte("HTTP/1.1 200 "))
		chunk := make([]byte, 64<<10)
		for i := range chunk {
			chunk[i] = 'a'
		}
		for range 1024 { // 64 MB at most
			if _, err := conn.Write(chunk); err != nil {
				return
			}
		}
	}()
	c := newHealthzClient(func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, ln.Addr().String())
	}, time.Second)
	defer c.CloseIdleConnections()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, _, err = c.get(t.Context(), "10.0.0.5:10256")
	runtime.ReadMemStats(&after)
	grew := after.TotalAlloc - before.TotalAlloc
	t.Logf("endless status line: %v; %d KiB allocated during the exchange (answer bound %d KiB)", err, grew>>10, maxHealthzAnswer>>10)
	if err == nil {
		t.Fatal("an endless status line was accepted")
	}
	if grew > 16*maxHealthzAnswer {
		t.Errorf("%d bytes allocated for an endless answer, want at most %d", grew, 16*maxHealthzAnswer)
	}
}
