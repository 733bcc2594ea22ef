package runtimeapi

import (
	"bufio"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeMaster is a unix-socket server standing in for the master CLI. For
// each connection it reads one line, then calls answer; answer's reply is
// written, then the connection is closed unless hold is set, in which case
// it stays open until the test ends.
type fakeMaster struct {
	path   string
	mu     sync.Mutex
	lines  []string // every command line received, without "\n"
	halfOK []bool   // whether the client shut down its side after the line
}

func newFakeMaster(t *testing.T, answer func(line string) (reply string, hold bool)) *fakeMaster {
	t.Helper()
	path := filepath.Join(t.TempDir(), "master.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatalf("listen on %s: %v", path, err)
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	t.Cleanup(func() { close(done); ln.Close(); wg.Wait() })
	f := &fakeMaster{path: path}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer conn.Close()
				f.serve(conn, answer, done)
			}()
		}
	}()
	return f
}

func (f *fakeMaster) serve(conn net.Conn, answer func(string) (string, bool), done <-chan struct{}) {
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second)) // bounds a stuck test
	r := bufio.NewReader(conn)
	line, err := r.ReadString('\n')
	if err != nil {
		return
	}
	rest, _ := io.ReadAll(r) // the client half-closes after its line
	f.mu.Lock()
	f.lines = append(f.lines, strings.TrimSuffix(line, "\n"))
	f.halfOK = append(f.halfOK, len(rest) == 0)
	f.mu.Unlock()
	reply, hold := answer(strings.TrimSuffix(line, "\n"))
	_, _ = io.WriteString(conn, reply)
	if hold {
		<-done
	}
}

func (f *fakeMaster) received() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.lines...)
}

// fixture returns the content of testdata/2.6/name.
func fixture(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "2.6", name))
	if err != nil {
		t.Fatalf("read fixture: %v", err)
	}
	return string(b)
}

// within runs f and fails the test if it does not return within limit.
func within[T any](t *testing.T, limit time.Duration, f func() T) T {
	t.Helper()
	ch := make(chan T, 1)
	go func() { ch <- f() }()
	select {
	case v := <-ch:
		return v
	case <-time.After(limit):
		t.Fatalf("call did not return within %v", limit)
		panic("unreachable")
	}
}
