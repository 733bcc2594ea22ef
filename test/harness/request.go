package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"time"
)

// Kind is what a client saw for one request.
type Kind string

// The kinds of outcome a client records.
const (
	KindOK      Kind = "ok"      // a complete response (Request: a 200 with the pod's name)
	KindRefused Kind = "refused" // ECONNREFUSED on connect
	KindReset   Kind = "reset"   // ECONNRESET, EPIPE or EOF before the reply was complete
	Kind5xx     Kind = "5xx"     // a response with a 5xx status
	KindTimeout Kind = "timeout" // the request's own deadline passed
	KindOther   Kind = "other"   // anything else (Request: a status other than 200 and 5xx)
)

// Kinds lists every kind, ok first.
var Kinds = []Kind{KindOK, KindRefused, KindReset, Kind5xx, KindTimeout, KindOther}

// Failures lists every kind but ok.
var Failures = Kinds[1:]

// Outcome is one request through the ClusterIP.
type Outcome struct {
	Node       string    // the node whose network namespace sent it
	Sent, Done time.Time // when it was sent and when it ended
	Pod        string    // the answering pod: the body of a 200
	Kind       Kind      // one of the Kind constants
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
		o.Kind, o.Err, o.Done = Classify(err), err.Error(), time.Now()
		return o
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1024))
	resp.Body.Close()
	o.Done = time.Now()
	switch {
	case err != nil:
		o.Kind, o.Err = Classify(err), err.Error()
	case resp.StatusCode >= 500:
		o.Kind, o.Err = Kind5xx, resp.Status
	case resp.StatusCode != http.StatusOK:
		o.Kind, o.Err = KindOther, resp.Status
	default:
		o.Kind, o.Pod = KindOK, string(body)
	}
	return o
}

// Classify maps a request error to a kind; nil is ok.
func Classify(err error) Kind {
	var ne net.Error
	switch {
	case err == nil:
		return KindOK
	case errors.Is(err, syscall.ECONNREFUSED):
		return KindRefused
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return KindReset
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded),
		errors.As(err, &ne) && ne.Timeout():
		return KindTimeout
	}
	// Errors that lost their chain on the way (x/net/http2 formats some).
	s := err.Error()
	switch {
	case strings.Contains(s, "connection refused"):
		return KindRefused
	case strings.Contains(s, "connection reset"), strings.Contains(s, "broken pipe"),
		strings.Contains(s, "EOF"), strings.Contains(s, "connection lost"):
		return KindReset
	}
	return KindOther
}

// ClassifyStatus maps a complete response to ok or 5xx.
func ClassifyStatus(status int) Kind {
	if status >= 500 {
		return Kind5xx
	}
	return KindOK
}

// Describe lists at most n of list, one per line, for failure messages.
func Describe[T fmt.Stringer](list []T, n int) string {
	var b strings.Builder
	for i, o := range list {
		if i == n {
			fmt.Fprintf(&b, "\n  … and %d more", len(list)-n)
			break
		}
		b.WriteString("\n  " + o.String())
	}
	return b.String()
}
