package metrics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/hapsuper/hapsuper/status"
)

// limits bound what one client can hold of the server. A scrape is one small
// GET answered in milliseconds; anything slower is a stuck or hostile client.
type limits struct {
	readHeader  time.Duration // a slowloris is cut after this
	read        time.Duration // whole request
	write       time.Duration // from the end of the headers to the end of the reply
	idle        time.Duration // keep-alive between scrapes
	maxHeader   int           // bytes
	connections int           // open at once; more wait (connections not in the handler are closed for them: connLimit)
	shutdown    time.Duration // graceful Shutdown before connections are closed
}

// defaultLimits: the idle timeout outlasts a 30 s scrape interval so that a
// Prometheus keeps its connection. The shutdown wait is short because it
// comes out of hapsuper's exit, after HAProxy is gone and inside the margin
// before the kubelet's SIGKILL; a scrape that misses the end loses nothing.
var defaultLimits = limits{
	readHeader:  5 * time.Second,
	read:        10 * time.Second,
	write:       10 * time.Second,
	idle:        65 * time.Second,
	maxHeader:   16 << 10,
	connections: 16,
	shutdown:    500 * time.Millisecond,
}

// Listen opens the metrics address before anything else starts, so that a
// taken port fails hapsuper before HAProxy runs.
func Listen(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen for metrics on %s: %w: free the port or change --metrics-addr", addr, err)
	}
	return ln, nil
}

// Serve serves /metrics, read from b at each scrape, and /healthz on ln
// until ctx ends, then shuts down gracefully (half a second at most), closes
// ln and returns nil. It returns an error only when serving failed; ln is
// closed either way.
func Serve(ctx context.Context, ln net.Listener, b *status.Board, log *slog.Logger) error {
	return serve(ctx, ln, handler(collector{board: b, now: time.Now}), defaultLimits, log)
}

// contentType is the text format's, as Prometheus asks for it.
const contentType = "text/plain; version=0.0.4; charset=utf-8"

// handler serves the two paths. A rendering reads memory and three small
// /proc files, so it needs no in-flight limit or timeout of its own: the
// connection limit and the write timeout bound it.
func handler(c collector) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, _ *http.Request) {
		var e exposition
		c.write(&e)
		w.Header().Set("Content-Type", contentType)
		_ = e.writeTo(w) // the client went away; nothing to do
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	return mux
}

func serve(ctx context.Context, ln net.Listener, h http.Handler, l limits, log *slog.Logger) error {
	lim := newConnLimit(ln, l.connections)
	srv := &http.Server{
		Handler:           lim.answering(h),
		ConnState:         lim.connState,
		ConnContext:       lim.connContext,
		ReadHeaderTimeout: l.readHeader,
		ReadTimeout:       l.read,
		WriteTimeout:      l.write,
		IdleTimeout:       l.idle,
		MaxHeaderBytes:    l.maxHeader,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(lim) }()
	log.Info("metrics listening", "addr", ln.Addr().String())
	select {
	case err := <-errc:
		return fmt.Errorf("serve metrics on %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), l.shutdown)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		log.Debug("metrics shutdown cut short: connections closed", "err", err)
		srv.Close()
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve metrics on %s: %w", ln.Addr(), err)
	}
	return nil
}
