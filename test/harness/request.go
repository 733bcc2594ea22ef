package harness

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"syscall"
	"time"
)

// Outcome kinds of one request.
const (
	KindOK      = "ok"
	KindRefused = "refused"
	KindReset   = "reset"
	Kind5xx     = "5xx"
	KindTimeout = "timeout"
	KindOther   = "other"
)

// Outcome is one request through the ClusterIP.
type Outcome struct {
	Node       string    // the node whose network namespace sent it
	Sent, Done time.Time // when it was sent and when it ended
	Pod        string    // the answering pod: the body of a 200
	Kind       string    // one of the Kind constants
	Err        string    // the error or the status, when not KindOK
}

// String describes the outcome on one line.
func (o Outcome) String() string {
	s := fmt.Sprintf("%s %s %s", o.Sent.Format("15:04:05.000"), o.Node, o.Kind)
	if o.Pod != "" {
		s += " " + o.Pod
	}
	if o.Err != "" {
		s += " (" + o.Err + ")"
	}
	return s
}

// Request makes one GET of url with client from node and classifies what
// happened.
func Request(client *http.Client, node, url string) Outcome {
	o := Outcome{Node: node, Sent: time.Now()}
	resp, err := client.Get(url)
	if err != nil {
		o.Kind, o.Err, o.Done = ClassifyErr(err), err.Error(), time.Now()
		return o
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1024))
	resp.Body.Close()
	o.Done = time.Now()
	switch {
	case err != nil:
		o.Kind, o.Err = ClassifyErr(err), err.Error()
	case resp.StatusCode >= 500:
		o.Kind, o.Err = Kind5xx, resp.Status
	case resp.StatusCode != http.StatusOK:
		o.Kind, o.Err = KindOther, resp.Status
	default:
		o.Kind, o.Pod = KindOK, string(body)
	}
	return o
}

// ClassifyErr sorts a client error into a failure kind.
func ClassifyErr(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return KindRefused
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return KindReset
	case errors.As(err, &ne) && ne.Timeout():
		return KindTimeout
	}
	return KindOther
}
