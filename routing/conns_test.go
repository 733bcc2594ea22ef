package routing

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

// pipeDial opens net.Pipes, keeping their far ends in opened.
func pipeDial(opened *[]net.Conn) dialFunc {
	return func(context.Context, string, string) (net.Conn, error) {
		a, b := net.Pipe()
		*opened = append(*opened, b)
		return a, nil
	}
}

// closedConn says whether the far end of a pipe sees its conn closed
// (an open one times out at once: nothing reads it).
func closedConn(far net.Conn) bool {
	far.SetWriteDeadline(time.Now())
	_, err := far.Write([]byte{0})
	return errors.Is(err, io.ErrClosedPipe)
}

// The set closes every connection to an address, whichever are open, and
// leaves other addresses' alone; a connection its holder closed leaves
// the set, before or after the set closed the address's.
func TestConnSetClosesAnAddress(t *testing.T) {
	var s connSet
	var far []net.Conn
	dial := s.track(pipeDial(&far))
	open := func(addr string) net.Conn {
		c, err := dial(t.Context(), "tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	a1, a2, a3, b1 := open("a:1"), open("a:1"), open("a:1"), open("b:1")
	if n := s.open("a:1"); n != 3 {
		t.Fatalf("%d open to a:1, want 3", n)
	}
	a2.Close() // the middle of the list
	a3.Close() // the first
	if n := s.open("a:1"); n != 1 {
		t.Fatalf("%d open to a:1 after two closed, want 1", n)
	}
	a4 := open("a:1")
	s.close("a:1")
	if n := s.open("a:1"); n != 0 {
		t.Errorf("%d open to a:1 after close, want 0", n)
	}
	for i, c := range []int{0, 4} { // a1, a4: far ends in dial order a1, a2, a3, b1, a4
		if !closedConn(far[c]) {
			t.Errorf("connection %d to a:1 left open", i)
		}
	}
	a5 := open("a:1")
	a1.Close() // closed by the set already: leaves a5 in it
	a4.Close()
	if n := s.open("a:1"); n != 1 {
		t.Errorf("%d open to a:1, want 1 (the one opened after close)", n)
	}
	if n := s.open("b:1"); n != 1 || closedConn(far[3]) {
		t.Errorf("b:1: %d open, want 1 and still open", n)
	}
	a5.Close()
	b1.Close()
	if len(s.byAddr) != 0 {
		t.Errorf("%d addresses left in the set with every connection closed", len(s.byAddr))
	}
}
