package status

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"regexp"
	"time"
)

// A reload asked over the status socket ("reload <origin>") is answered
// with the outcome of the reload that serves it, and of no other: the
// shims (gopherd, s6-svc) that turn a controller's fallback reload into a
// checked one must not report another caller's. The server hands the ask
// to the supervisor's loop and holds the connection, as a watch, until the
// loop answers, the server closes, or ReloadWait passes.

// ReloadAsk is one reload asked over the socket. The supervisor answers
// on Done (buffered: its send never blocks) once the reload that serves
// it ends, or says why none will.
type ReloadAsk struct {
	Origin string           // who asked, for the log and status: "gopherd", "s6-svc"
	Done   chan ReloadReply // buffered, one answer
}

// ReloadReply answers a ReloadAsk: the ended reload that served it, or
// why none was sent.
type ReloadReply struct {
	Reload *Reload `json:"reload,omitempty"`
	Error  string  `json:"error,omitempty"`
}

// ReloadWait bounds the wait for a reload's outcome: a check (bounded by
// the supervisor's haproxy -c timeout, 30 s) queued behind another, then
// the new worker (10 s).
const ReloadWait = 90 * time.Second

// askTimeout bounds the wait for the loop to take an ask.
const askTimeout = 5 * time.Second

// originPattern is what an origin may be: a short word.
var originPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,31}$`)

// TakeReloads has the server hand the reloads asked on its socket to
// asks, which the supervisor's loop reads; without it a reload request
// is refused. Call it before Serve.
func (s *Server) TakeReloads(asks chan<- ReloadAsk) { s.asks = asks }

// askReload hands a reload asked by origin to the loop and writes its
// answer. It holds a watch's slot while it waits.
func (s *Server) askReload(conn *net.UnixConn, enc *json.Encoder, origin string) {
	if s.asks == nil {
		enc.Encode(ReloadReply{Error: "this hapsuper takes no reload requests"})
		return
	}
	if !originPattern.MatchString(origin) {
		enc.Encode(ReloadReply{Error: fmt.Sprintf("bad reload request: send \"reload <origin>\\n\", origin a word such as gopherd, not %q", truncate(origin, 32))})
		return
	}
	ask := ReloadAsk{Origin: origin, Done: make(chan ReloadReply, 1)}
	wait := time.NewTimer(askTimeout)
	defer wait.Stop()
	select {
	case s.asks <- ask:
	case <-s.closing:
		enc.Encode(ReloadReply{Error: "hapsuper is exiting: no reload is sent now"})
		return
	case <-wait.C:
		enc.Encode(ReloadReply{Error: fmt.Sprintf("hapsuper did not take the reload within %v: see its log", askTimeout)})
		return
	}
	wait.Reset(ReloadWait)
	var reply ReloadReply
	select {
	case reply = <-ask.Done:
	case <-s.closing:
		reply = ReloadReply{Error: "hapsuper exited before the reload ended"}
	case <-wait.C:
		reply = ReloadReply{Error: fmt.Sprintf("the reload did not end within %v: see hapsuper's log", ReloadWait)}
	}
	s.setDeadline(conn, replyTimeout)
	enc.Encode(reply)
}

// AskReload asks the hapsuper serving the status socket at path for a
// checked reload on behalf of origin, and returns the reload that served
// it once it ended: ok, refused or failed. An error says why there is no
// outcome (no hapsuper there, stopping, no answer in time).
func AskReload(path, origin string, timeout time.Duration) (Reload, error) {
	c, err := net.DialTimeout("unix", path, timeout)
	if err != nil {
		return Reload{}, fmt.Errorf("connect to status socket %s: %w", path, err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(timeout))
	if _, err := io.WriteString(c, "reload "+origin+"\n"); err != nil {
		return Reload{}, fmt.Errorf("ask %s for a reload: %w", path, err)
	}
	line, err := bufio.NewReaderSize(io.LimitReader(c, maxReply), 4096).ReadBytes('\n')
	if err != nil && !(errors.Is(err, io.EOF) && len(line) > 0) {
		return Reload{}, fmt.Errorf("read the reload's outcome from %s: %w", path, err)
	}
	var r ReloadReply
	if err := json.Unmarshal(line, &r); err != nil {
		return Reload{}, fmt.Errorf("read the reload's outcome from %s: %w", path, err)
	}
	switch {
	case r.Error != "":
		return Reload{}, errors.New(r.Error)
	case r.Reload == nil:
		return Reload{}, fmt.Errorf("read the reload's outcome from %s: an empty answer", path)
	}
	return *r.Reload, nil
}
