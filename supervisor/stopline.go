package supervisor

import (
	"strconv"
	"strings"
)

// workerStop is one "Proxy web stopped (cumulated conns: FE: 65, BE: 0)."
// line of HAProxy's stderr: the proxy of worker pid stopped accepting, its
// frontend having accepted opened connections (conn_tot) by then. The
// drain accounts with it for a worker that leaves while the master CLI
// refuses (drain.Drain.WorkerStopped): a reload's old worker exits between
// two readings that cannot see it.
type workerStop struct {
	pid    int
	proxy  string
	opened uint64
}

// stopLineBuffer bounds the stop lines waiting for the loop; a line that
// finds it full is dropped, and the drain then treats the worker as unseen
// (a change), never as quiet.
const stopLineBuffer = 64

// parseStopLine reads a stop line's text (after the "[WARNING] (pid) : "
// prefix); ok is false for any other line.
func parseStopLine(msg string) (proxy string, opened uint64, ok bool) {
	rest, ok := strings.CutPrefix(msg, "Proxy ")
	if !ok {
		return "", 0, false
	}
	proxy, rest, ok = strings.Cut(rest, " stopped (cumulated conns: FE: ")
	if !ok || proxy == "" || strings.ContainsRune(proxy, ' ') {
		return "", 0, false
	}
	num, _, ok := strings.Cut(rest, ",")
	if !ok {
		return "", 0, false
	}
	n, err := strconv.ParseUint(num, 10, 64)
	if err != nil {
		return "", 0, false
	}
	return proxy, n, true
}

// noteStop hands a stop line to the loop without ever blocking the relay.
func (s *stderrRelay) noteStop(line []byte) {
	if s.stopLines == nil {
		return
	}
	_, pid, msg := parseHAProxyLine(line)
	proxy, n, ok := parseStopLine(msg)
	if !ok || pid == 0 {
		return
	}
	select {
	case s.stopLines <- workerStop{pid: pid, proxy: proxy, opened: n}:
	default:
	}
}
