package supervisor

import "testing"

// Stop lines as HAProxy 2.6 writes them when a worker stops (a reload's old
// worker, or the soft stop), and lines that look alike.
func TestParseStopLine(t *testing.T) {
	for _, tc := range []struct {
		line   string
		proxy  string
		opened uint64
		ok     bool
	}{
		{"[WARNING]  (11420) : Proxy web stopped (cumulated conns: FE: 65, BE: 0).", "web", 65, true},
		{"[WARNING]  (6827) : Proxy be_http stopped (cumulated conns: FE: 0, BE: 69).", "be_http", 0, true},
		{"[WARNING]  (6827) : Proxy <HTTPCLIENT> stopped (cumulated conns: FE: 0, BE: 0).", "<HTTPCLIENT>", 0, true},
		{"[NOTICE]   (6544) : New worker (7140) forked", "", 0, false},
		{"[WARNING]  (6827) : Proxy web stopped (cumulated conns: FE: x, BE: 0).", "", 0, false},
		{"[WARNING]  (6827) : Proxy web stopped.", "", 0, false},
		{"[WARNING]  (6827) : Stopping frontend web in 0 ms.", "", 0, false},
	} {
		_, _, msg := parseHAProxyLine([]byte(tc.line))
		proxy, n, ok := parseStopLine(msg)
		if proxy != tc.proxy || n != tc.opened || ok != tc.ok {
			t.Errorf("parseStopLine(%q) = %q %d %v, want %q %d %v", msg, proxy, n, ok, tc.proxy, tc.opened, tc.ok)
		}
	}
}

// The relay hands stop lines to the loop, with the worker's pid, and never
// blocks on a full buffer.
func TestRelayNotesStopLines(t *testing.T) {
	ch := make(chan workerStop, 1)
	s := &stderrRelay{stopLines: ch}
	s.noteStop([]byte("[WARNING]  (11420) : Proxy web stopped (cumulated conns: FE: 65, BE: 0)."))
	s.noteStop([]byte("[WARNING]  (11420) : Proxy api stopped (cumulated conns: FE: 3, BE: 0).")) // dropped: full
	s.noteStop([]byte("[NOTICE]   (6544) : Loading success."))
	if got := <-ch; got != (workerStop{pid: 11420, proxy: "web", opened: 65}) {
		t.Fatalf("stop line %+v", got)
	}
	select {
	case got := <-ch:
		t.Fatalf("unexpected stop line %+v", got)
	default:
	}
}
