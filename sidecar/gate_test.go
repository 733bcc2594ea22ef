package sidecar

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeLoop answers the gate's asks as the loop does: not deleting until a
// deletion arrives, then held until release is closed.
type fakeLoop struct {
	asks      chan ask
	deleted   chan deletion
	done      chan struct{}
	release   chan struct{}
	deletions []deletion
}

func newFakeLoop(t *testing.T) *fakeLoop {
	f := &fakeLoop{asks: make(chan ask), deleted: make(chan deletion), done: make(chan struct{}), release: make(chan struct{})}
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop); <-f.done })
	go func() {
		defer close(f.done)
		var held []chan<- answer
		for {
			select {
			case a := <-f.asks:
				if len(f.deletions) == 0 {
					a.reply <- answer{text: "not deleting", notDeleting: true}
					continue
				}
				held = append(held, a.reply)
			case d := <-f.deleted:
				f.deletions = append(f.deletions, d)
			case <-f.release:
				for _, r := range held {
					r <- answer{text: "drain ended"}
				}
				held, f.release = nil, nil
			case <-stop:
				return
			}
		}
	}()
	return f
}

func newTestGate(f *fakeLoop, readPod func(context.Context) (bool, time.Duration, error)) *gate {
	return &gate{asks: f.asks, deleted: f.deleted, done: f.done, readPod: readPod, slots: make(chan struct{}, maxHeld), webSlots: make(chan struct{}, maxHeld),
		now: time.Now, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

// A request the watch calls not deleting is checked against the pod: not
// deleted, it is answered at once; deleted, the deletion goes to the loop
// and the request is held like any other; a pod that cannot be read
// answers at once (a liveness restart must not wait).
func TestGateReadsThePod(t *testing.T) {
	f := newFakeLoop(t)
	g := newTestGate(f, func(context.Context) (bool, time.Duration, error) { return false, 0, nil })
	if got := g.request(context.Background(), g.slots); got != "not deleting" {
		t.Errorf("pod not deleted: %q", got)
	}
	g.readPod = func(context.Context) (bool, time.Duration, error) { return false, 0, errors.New("forbidden") }
	if got := g.request(context.Background(), g.slots); got != "not deleting" {
		t.Errorf("pod unreadable: %q", got)
	}
	g.readPod = func(context.Context) (bool, time.Duration, error) { return true, 20 * time.Second, nil }
	got := make(chan string, 1)
	go func() { got <- g.request(context.Background(), g.slots) }()
	select {
	case s := <-got:
		t.Fatalf("answered %q while the pod is being deleted", s)
	case <-time.After(200 * time.Millisecond):
	}
	close(f.release)
	select {
	case s := <-got:
		if s != "drain ended" {
			t.Errorf("answer %q", s)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("not answered after the release")
	}
	if len(f.deletions) != 1 || f.deletions[0].grace != 20*time.Second {
		t.Errorf("deletions %+v, want one with the pod's grace period", f.deletions)
	}
}

// Both transports carry the answer: a unix connection gets one line and is
// closed, an HTTP GET on GatePath gets it as its body.
func TestGateTransports(t *testing.T) {
	f := newFakeLoop(t)
	g := newTestGate(f, nil)
	path := filepath.Join(t.TempDir(), "gate.sock")
	var err error
	if g.unix, err = listenUnix(path); err != nil {
		t.Fatal(err)
	}
	g.unixPath = path
	if g.httpLn, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	g.http = &http.Server{Handler: g.handler(), ReadHeaderTimeout: readHeaderTimeout}
	served := make(chan error, 2)
	go func() { served <- g.serveUnix() }()
	go func() { served <- g.serveHTTP() }()
	defer func() {
		g.close()
		for range 2 {
			if err := <-served; err != nil {
				t.Error(err)
			}
		}
	}()

	conn, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	b, err := io.ReadAll(conn)
	conn.Close()
	if err != nil || string(b) != "not deleting\n" {
		t.Errorf("unix: %q, %v", b, err)
	}
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + g.httpLn.Addr().String() + GatePath)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || strings.TrimSpace(string(body)) != "not deleting" {
		t.Errorf("http: %d %q", resp.StatusCode, body)
	}
	if resp, err := c.Post("http://"+g.httpLn.Addr().String()+GatePath, "text/plain", nil); err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("POST: %d, want 405", resp.StatusCode)
		}
	}
}

// Requests over the bound of their transport are answered at once; a
// flood on the HTTP gate leaves the unix socket's requests their places.
func TestGateBoundPerTransport(t *testing.T) {
	f := newFakeLoop(t)
	g := newTestGate(f, nil)
	for range maxHeld {
		g.webSlots <- struct{}{}
	}
	if got := g.request(context.Background(), g.webSlots); !strings.Contains(got, "too many") {
		t.Errorf("HTTP request over the bound: %q, want answered at once", got)
	}
	if got := g.request(context.Background(), g.slots); got != "not deleting" {
		t.Errorf("unix request with the HTTP gate full: %q, want the loop's answer", got)
	}
}
