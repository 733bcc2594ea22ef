package k8stest

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"
)

func TestNextSourcePort(t *testing.T) {
	for _, c := range []struct{ last, want int }{
		{0, firstSourcePort},
		{firstSourcePort, firstSourcePort + 1},
		{lastSourcePort - 1, lastSourcePort},
		{lastSourcePort, firstSourcePort},
		{65000, firstSourcePort},
		{31000, firstSourcePort}, // the NodePort range is never used
	} {
		if got := nextSourcePort(c.last); got != c.want {
			t.Errorf("nextSourcePort(%d) = %d, want %d", c.last, got, c.want)
		}
	}
	// kube-proxy listens on health check node ports in the node's namespace.
	if firstSourcePort <= 32767 && lastSourcePort >= 30000 {
		t.Errorf("source ports %d-%d overlap the NodePort range 30000-32767", firstSourcePort, lastSourcePort)
	}
	// A port comes back only after conntrack's TIME_WAIT (120 s) has ended
	// the node's entry for it, at 100 connections/s.
	if period := time.Duration(lastSourcePort-firstSourcePort+1) * time.Second / 100; period <= 120*time.Second {
		t.Errorf("source ports come back after %v at 100 connections/s, before conntrack's 120 s TIME_WAIT", period)
	}
}

// dialFrom takes the ports in turn and skips one held by another socket.
func TestDialFrom_PortsInTurn(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	const ns = "srcport-test"
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	port := func() int {
		t.Helper()
		c, err := dialFrom(ctx, ns, "tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.LocalAddr().(*net.TCPAddr).Port
	}
	// skipped checks that every port dialFrom passed over between want and
	// got could not be bound the way it binds (a socket of this machine,
	// or a TIME_WAIT of an earlier dial, holds it).
	skipped := func(want, got int) {
		t.Helper()
		for p := want; p != got; p = nextSourcePort(p) {
			d := net.Dialer{LocalAddr: &net.TCPAddr{Port: p}}
			if c, err := d.DialContext(ctx, "tcp", ln.Addr().String()); err == nil {
				c.Close()
				t.Fatalf("source port %d, want %d: port %d was free", got, want, p)
			}
		}
	}
	first := port()
	if first < firstSourcePort || first > lastSourcePort {
		t.Fatalf("first source port %d outside %d-%d", first, firstSourcePort, lastSourcePort)
	}
	second := port()
	skipped(nextSourcePort(first), second)
	// Hold the next two ports: the dial passes over them.
	want := nextSourcePort(second)
	for range 2 {
		if held, err := net.Listen("tcp", net.JoinHostPort("0.0.0.0", strconv.Itoa(want))); err == nil {
			defer held.Close()
		}
		want = nextSourcePort(want)
	}
	third := port()
	if third == nextSourcePort(second) {
		t.Fatalf("source port %d was held, and dialFrom took it", third)
	}
	skipped(want, third)
}
