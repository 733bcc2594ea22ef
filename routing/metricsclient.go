package routing

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hapsuper/hapsuper/routing/judge"
)

// The metrics client reads kube-proxy's /metrics (--metrics-bind-address)
// for the samples the confirmation uses (judge.Metrics) and nothing
// else. It scans the text exposition line by line rather than handing it
// to prometheus/common's expfmt: expfmt parses every family into memory
// (kube-proxy's answer is 100-300 KB of histograms and Go runtime
// families, times thousands of nodes per round), and a few single-sample
// lines need no parser. Bounds: maxMetricsAnswer bytes, the request's
// timeout, lines longer than maxMetricsLine skipped; the scan stops once
// the last family it wants (process_start_time_seconds: families come
// sorted by name) is read.

// The families read. takeLine skips a line by its first byte unless it
// is one of theirs.
const (
	metricSyncStamp   = "kubeproxy_sync_proxy_rules_last_timestamp_seconds"
	metricQueued      = "kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds"
	metricSyncCount   = "kubeproxy_sync_proxy_rules_duration_seconds_count"
	metricSyncSum     = "kubeproxy_sync_proxy_rules_duration_seconds_sum"
	metricPending     = "kubeproxy_sync_proxy_rules_endpoint_changes_pending"
	metricStart       = "process_start_time_seconds"
	maxMetricsAnswer  = 4 << 20
	maxMetricsLine    = 4 << 10
	metricsReadBuffer = 8 << 10
)

// silentError is a metrics request that no answer ended: the port
// refused the connection, or nothing came within the timeout (timedOut).
// The node is not asked for its metrics again in the drain, unless a
// timeout came while its kube-proxy was frozen (Observer.readMetrics).
type silentError struct {
	err      error
	timedOut bool
}

func (e *silentError) Error() string { return e.err.Error() }
func (e *silentError) Unwrap() error { return e.err }

// errNoProcessStart: the answer lacks process_start_time_seconds, without
// which no sample can be tied to a process.
var errNoProcessStart = errors.New("no " + metricStart + ": not kube-proxy's metrics")

// errMetricsTooLong: maxMetricsAnswer bytes read without the samples.
var errMetricsTooLong = fmt.Errorf("answer longer than %d bytes without %s: not kube-proxy's metrics", maxMetricsAnswer, metricStart)

// parseMetrics scans a text exposition for the samples judge.Metrics
// holds. It reads at most maxMetricsAnswer bytes of r.
func parseMetrics(r io.Reader) (judge.Metrics, error) {
	return parseMetricsWith(bufio.NewReaderSize(nil, metricsReadBuffer), r)
}

// parseMetricsWith is parseMetrics reading through br, which it resets to
// r; it stops at the samples, leaving the rest of r, and what br holds of
// it, unread.
func parseMetricsWith(br *bufio.Reader, r io.Reader) (judge.Metrics, error) {
	m := judge.Metrics{Synced: map[discovery.AddressType]time.Time{}, Queued: map[discovery.AddressType]time.Time{},
		Durations: map[discovery.AddressType]judge.SyncDurations{}}
	lr := &io.LimitedReader{R: r, N: maxMetricsAnswer + 1}
	br.Reset(lr)
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			if len(line) < maxMetricsLine {
				line = append(line, chunk...)
			}
			continue
		case len(line) > 0:
			chunk = append(line, chunk...)
			line = line[:0]
		}
		if len(chunk) <= maxMetricsLine {
			if done, perr := takeLine(&m, bytes.TrimSpace(chunk)); perr != nil {
				return judge.Metrics{}, perr
			} else if done {
				break
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return judge.Metrics{}, err
		}
	}
	if m.ProcessStart.IsZero() && lr.N == 0 {
		return judge.Metrics{}, errMetricsTooLong
	}
	if m.ProcessStart.IsZero() {
		return judge.Metrics{}, errNoProcessStart
	}
	return m, nil
}

// takeLine takes one exposition line into m; done once
// process_start_time_seconds is read, the last of the families wanted in
// name order.
func takeLine(m *judge.Metrics, l []byte) (done bool, err error) {
	if len(l) == 0 || (l[0] != metricSyncStamp[0] && l[0] != metricStart[0]) {
		return false, nil // a comment, or a family not read: most lines
	}
	name, labels, value, ok := splitSample(l)
	if !ok {
		return false, nil
	}
	switch string(name) {
	case metricSyncStamp, metricQueued:
		fam := discovery.AddressType(labelValue(labels, "ip_family"))
		if fam != discovery.AddressTypeIPv4 && fam != discovery.AddressTypeIPv6 {
			return false, nil
		}
		t, err := unixSeconds(value, string(name))
		if err != nil {
			return false, err
		}
		switch {
		case t.IsZero():
		case string(name) == metricSyncStamp:
			m.Synced[fam] = t
		default:
			m.Queued[fam] = t
		}
	case metricSyncCount, metricSyncSum:
		fam := discovery.AddressType(labelValue(labels, "ip_family"))
		if fam != discovery.AddressTypeIPv4 && fam != discovery.AddressTypeIPv6 {
			return false, nil
		}
		v, err := strconv.ParseFloat(string(value), 64)
		if err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
			return false, fmt.Errorf("%s %q: not a count of seconds", name, clipPeer(string(value)))
		}
		d := m.Durations[fam]
		if string(name) == metricSyncCount {
			if v > math.MaxInt64 || v != math.Trunc(v) {
				return false, fmt.Errorf("%s %q: not a count", name, clipPeer(string(value)))
			}
			d.Count = uint64(v)
		} else {
			d.Sum = v
		}
		m.Durations[fam] = d
	case metricPending:
		v, err := strconv.ParseFloat(string(value), 64)
		if err != nil || v < 0 || v > math.MaxInt32 || v != math.Trunc(v) {
			return false, fmt.Errorf("%s %q: not a count", metricPending, clipPeer(string(value)))
		}
		m.Pending, m.HasPending = int(v), true
	case metricStart:
		t, err := unixSeconds(value, metricStart)
		if err != nil {
			return false, err
		}
		if t.IsZero() {
			return false, fmt.Errorf("%s is 0", metricStart)
		}
		m.ProcessStart = t
		return true, nil
	}
	return false, nil
}

// splitSample splits `name{labels} value [timestamp]`.
func splitSample(l []byte) (name, labels, value []byte, ok bool) {
	i := bytes.IndexAny(l, "{ \t")
	if i <= 0 {
		return nil, nil, nil, false
	}
	name, rest := l[:i], l[i:]
	if rest[0] == '{' {
		j := bytes.LastIndexByte(rest, '}')
		if j < 0 {
			return nil, nil, nil, false
		}
		labels, rest = rest[1:j], rest[j+1:]
	}
	f := bytes.Fields(rest)
	if len(f) == 0 || len(f) > 2 {
		return nil, nil, nil, false
	}
	return name, labels, f[0], true
}

// labelValue is the value of label key in `k="v",…`; empty when absent.
// kube-proxy's label values here (IPv4, IPv6) hold no escapes.
func labelValue(labels []byte, key string) string {
	for len(labels) > 0 {
		eq := bytes.IndexByte(labels, '=')
		if eq < 0 || eq+1 >= len(labels) || labels[eq+1] != '"' {
			return ""
		}
		k := bytes.TrimSpace(labels[:eq])
		rest := labels[eq+2:]
		end := bytes.IndexByte(rest, '"')
		if end < 0 {
			return ""
		}
		if string(k) == key {
			return string(rest[:end])
		}
		labels = bytes.TrimLeft(rest[end+1:], ", ")
	}
	return ""
}

// unixSeconds reads a gauge of seconds since the epoch; 0 is the zero time
// (a family not set yet).
func unixSeconds(v []byte, name string) (time.Time, error) {
	f, err := strconv.ParseFloat(string(v), 64)
	if err != nil || math.IsNaN(f) || f < 0 || f > 1e11 {
		return time.Time{}, fmt.Errorf("%s %q: not a time in seconds", name, clipPeer(string(v)))
	}
	if f == 0 {
		return time.Time{}, nil
	}
	sec := math.Floor(f)
	return time.Unix(int64(sec), int64((f-sec)*1e9)).UTC(), nil
}

// metricsClient asks kube-proxies' /metrics over HTTP/1.1 and keeps one
// idle connection per node for the next round, as healthzClient does: a
// dial per node per round cost a connection's setup and teardown each
// time. An idle connection is only the socket: the read buffers come from
// a pool for the length of a request, so thousands of kept connections do
// not hold thousands of buffers. Safe for concurrent use: two requests to
// one address at once take two connections, and one is kept.
type metricsClient struct {
	dial        dialFunc
	dialTimeout time.Duration
	now         func() time.Time

	idle idleConns[net.Conn]
}

// maxMetricsRest bounds what is read of an answer after the samples, to
// keep its connection: kube-proxy's whole answer is 100-300 KB, the
// families after process_start_time_seconds a part of it. A longer rest
// closes the connection instead.
const maxMetricsRest = 256 << 10

// metricsReaders are the read buffers of requests in flight: one for
// what the connection delivers (the status line, headers and the body's
// framing: a few reads per answer, where healthz's 512 bytes took one
// read per 512), one for the scan of the body.
var metricsReaders = sync.Pool{New: func() any {
	return &metricsReader{head: bufio.NewReaderSize(nil, metricsReadBuffer), body: bufio.NewReaderSize(nil, metricsReadBuffer)}
}}

type metricsReader struct{ head, body *bufio.Reader }

// fetch reads the metrics at addr (host:port) within timeout; sent is
// when the request was written, in the client's clock.
func (c *metricsClient) fetch(ctx context.Context, addr string, timeout time.Duration) (m judge.Metrics, sent time.Time, err error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if conn := c.take(addr); conn != nil {
		m, sent, err = c.exchange(ctx, conn, addr, timeout, true)
		if !errors.Is(err, errStale) {
			return m, sent, err
		}
	}
	dctx, dcancel := context.WithTimeout(ctx, c.dialTimeout)
	conn, err := c.dial(dctx, "tcp", addr)
	dcancel()
	if err != nil {
		return m, sent, &silentError{err: fmt.Errorf("metrics at %s unreachable: %w", addr, clipError(err))}
	}
	return c.exchange(ctx, conn, addr, timeout, false)
}

// exchange makes one request on conn and keeps conn for the next one when
// the answer was read to its end and the node keeps the connection open;
// it closes conn otherwise. On a reused connection that ends before any
// byte of the answer, it returns errStale for the caller to dial again.
func (c *metricsClient) exchange(ctx context.Context, conn net.Conn, addr string, timeout time.Duration, reused bool) (m judge.Metrics, sent time.Time, err error) {
	keep := false
	defer func() {
		if keep {
			c.put(addr, conn)
		} else {
			conn.Close()
		}
	}()
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	}
	rd := metricsReaders.Get().(*metricsReader)
	defer func() {
		rd.head.Reset(nil)
		rd.body.Reset(nil)
		metricsReaders.Put(rd)
	}()
	b := &answerBudget{r: conn, left: maxHealthzHead, over: errHeadTooLong}
	rd.head.Reset(b)
	sent = c.now()
	req := "GET /metrics HTTP/1.1\r\nHost: " + addr + "\r\nUser-Agent: hapsuper\r\nAccept: text/plain;version=0.0.4\r\n\r\n"
	if _, err := io.WriteString(conn, req); err != nil {
		return m, sent, c.failed(ctx, addr, err, timeout, reused)
	}
	if _, err := rd.head.Peek(1); err != nil {
		return m, sent, c.failed(ctx, addr, err, timeout, reused)
	}
	resp, err := http.ReadResponse(rd.head, nil)
	if err != nil {
		return m, sent, c.failed(ctx, addr, err, timeout, false)
	}
	defer resp.Body.Close()
	b.left, b.over = maxMetricsAnswer+maxHealthzHead, fmt.Errorf("answer longer than %d bytes: not kube-proxy's metrics", maxMetricsAnswer)
	if resp.StatusCode != http.StatusOK {
		return m, sent, fmt.Errorf("metrics at %s answered HTTP %d: not kube-proxy's metrics", addr, resp.StatusCode)
	}
	m, err = parseMetricsWith(rd.body, resp.Body)
	if err != nil {
		if ctx.Err() != nil || errors.Is(err, os.ErrDeadlineExceeded) {
			return judge.Metrics{}, sent, &silentError{fmt.Errorf("metrics at %s did not answer within %v", addr, timeout), true}
		}
		return judge.Metrics{}, sent, fmt.Errorf("metrics at %s: %w", addr, clipError(err))
	}
	// The rest of the answer, read to keep the connection: what the scan
	// buffered of it, then the body to its end, within maxMetricsRest.
	n, err := io.Copy(io.Discard, io.LimitReader(io.MultiReader(rd.body, resp.Body), maxMetricsRest+1))
	keep = err == nil && n <= maxMetricsRest && !resp.Close && rd.head.Buffered() == 0
	return m, sent, nil
}

func (c *metricsClient) failed(ctx context.Context, addr string, err error, timeout time.Duration, reused bool) error {
	switch {
	case ctx.Err() != nil || errors.Is(err, os.ErrDeadlineExceeded):
		return &silentError{fmt.Errorf("metrics at %s did not answer within %v", addr, timeout), true}
	case reused && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, net.ErrClosed)):
		return errStale
	}
	return fmt.Errorf("metrics at %s failed: %w", addr, clipError(err))
}

func (c *metricsClient) take(addr string) net.Conn {
	conn, _ := c.idle.take(addr)
	return conn
}

func (c *metricsClient) put(addr string, conn net.Conn) { c.idle.put(addr, conn) }

// closeIdle closes addr's idle connection, if any: its node is not asked
// again.
func (c *metricsClient) closeIdle(addr string) { c.idle.close(addr) }

// CloseIdleConnections closes every idle connection.
func (c *metricsClient) CloseIdleConnections() { c.idle.closeAll() }

// metricsAddr is the metrics address on the node of healthz address addr.
func metricsAddr(addr string, port int) string {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return ""
	}
	return net.JoinHostPort(host, strconv.Itoa(port))
}

// NodeMetrics is one node's kube-proxy metrics, as `hapsuper check` shows
// them.
type NodeMetrics struct {
	Node string
	Addr string // host:port asked; empty without an InternalIP
	Err  string // why they could not be read; empty when they were
	// Started is the process start; Synced the families with a
	// successful sync; HasPending whether the pending gauge is there.
	Started    time.Time
	Synced     []string
	HasPending bool
	// Syncs is how many syncs its duration histogram counted, every
	// family, since the process started; MeanSync their mean duration.
	Syncs    uint64
	MeanSync time.Duration
}

// ProbeKubeProxyMetrics lists the nodes and reads each node's kube-proxy
// metrics at port once, at most DefaultConcurrency at a time, each bounded
// by DefaultRequestTimeout. The error is the node list's.
func ProbeKubeProxyMetrics(ctx context.Context, client API, port int) ([]NodeMetrics, error) {
	list, err := client.ListNodes(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	mc := &metricsClient{dial: (&net.Dialer{}).DialContext, dialTimeout: DefaultRequestTimeout / 2, now: time.Now}
	defer mc.CloseIdleConnections()
	out := make([]NodeMetrics, len(list.Items))
	for i := range list.Items {
		out[i] = NodeMetrics{Node: list.Items[i].Name}
		if ip := internalIP(&list.Items[i]); ip.IsValid() {
			out[i].Addr = net.JoinHostPort(ip.String(), strconv.Itoa(port))
		} else {
			out[i].Err = "node has no InternalIP to reach kube-proxy at"
		}
	}
	idx := make([]int, 0, len(out))
	for i := range out {
		if out[i].Addr != "" {
			idx = append(idx, i)
		}
	}
	fanOut(ctx, DefaultConcurrency, idx, func(i int) {
		m, _, err := mc.fetch(ctx, out[i].Addr, DefaultRequestTimeout)
		if err != nil {
			out[i].Err = err.Error()
			return
		}
		out[i].Started, out[i].HasPending = m.ProcessStart, m.HasPending
		for fam := range m.Synced {
			out[i].Synced = append(out[i].Synced, string(fam))
		}
		slices.Sort(out[i].Synced)
		var sum float64
		for _, d := range m.Durations {
			out[i].Syncs += d.Count
			sum += d.Sum
		}
		if out[i].Syncs > 0 {
			out[i].MeanSync = time.Duration(sum / float64(out[i].Syncs) * float64(time.Second))
		}
	})
	slices.SortFunc(out, func(a, b NodeMetrics) int { return strings.Compare(a.Node, b.Node) })
	return out, nil
}
