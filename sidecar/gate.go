package sidecar

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/hapsuper/hapsuper/status"
)

// GatePath is the HTTP gate's path, for an httpGet preStop hook.
const GatePath = "/gate"

// maxHeld bounds the gate requests open at once, per transport: the
// kubelet sends one per stop, anyone else more (the HTTP gate answers on
// the pod's IP). A request over it is answered at once; each transport has
// its own, so that a flood of GETs from the cluster cannot take the exec
// hook's place on the unix socket, which only the pod reaches.
const maxHeld = 64

// gate is the gate's two transports in front of the loop: a unix socket
// (a connection is a request; the answer is one line, then the server
// closes it) and HTTP (GET GatePath). Neither has a write timeout: a held
// request waits as long as the drain, which the grace period bounds.
type gate struct {
	asks     chan<- ask
	deleted  chan<- deletion
	readPod  func(ctx context.Context) (bool, time.Duration, error) // nil: routing off
	done     <-chan struct{}                                        // closed when the loop returned
	slots    chan struct{}                                          // the unix socket's requests
	webSlots chan struct{}                                          // the HTTP gate's
	now      func() time.Time
	log      *slog.Logger
	unix     net.Listener
	http     *http.Server
	httpLn   net.Listener
	unixPath string
}

// request asks the loop and returns the answer: at once, or when the drain
// ended. A request the loop answered as not deleting is checked against
// the pod itself (the watch may not have delivered a deletion that the
// kubelet's hook already follows); a pod that is being deleted makes it a
// held request.
func (g *gate) request(ctx context.Context, slots chan struct{}) string {
	select {
	case slots <- struct{}{}:
		defer func() { <-slots }()
	default:
		return "too many gate requests open: answered at once"
	}
	at := g.now()
	a, ok := g.ask(ctx, at)
	if !ok {
		return "hapsuper stopped: the gate is open"
	}
	if !a.notDeleting || g.readPod == nil {
		return a.text
	}
	deleting, grace, err := g.readPod(ctx)
	switch {
	case err != nil:
		g.log.Warn("gate: the pod could not be read; answered as not deleted", "err", err)
		return a.text
	case !deleting:
		g.log.Info("gate asked while the pod is not being deleted: answered at once (a liveness or startup probe's restart, or a stray request)")
		return a.text
	}
	select {
	case g.deleted <- deletion{at: at, grace: grace}:
	case <-g.done:
		return "hapsuper stopped: the gate is open"
	}
	if a, ok = g.ask(ctx, at); !ok {
		return "hapsuper stopped: the gate is open"
	}
	return a.text
}

// ask hands one request to the loop and waits for its answer; false when
// the loop returned or the requester went away.
func (g *gate) ask(ctx context.Context, at time.Time) (answer, bool) {
	reply := make(chan answer, 1) // the loop never blocks on it
	select {
	case g.asks <- ask{at: at, reply: reply}:
	case <-g.done:
		return answer{}, false
	case <-ctx.Done():
		return answer{}, false
	}
	select {
	case a := <-reply:
		return a, true
	case <-g.done:
		return answer{}, false
	case <-ctx.Done():
		return answer{}, false
	}
}

// listenUnix makes the gate's unix socket at path, mode 0666: the HAProxy
// container's user, whichever it is, must reach it, and a request changes
// nothing.
func listenUnix(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("create directory for --gate-socket %s: %w (give --gate-socket a path on a volume both containers mount)", path, err)
	}
	if err := status.RemoveStaleSocket(path); err != nil {
		return nil, fmt.Errorf("--gate-socket %s: %w", path, err)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listen on --gate-socket %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o666); err != nil {
		ln.Close()
		return nil, fmt.Errorf("chmod --gate-socket %s: %w", path, err)
	}
	return ln, nil
}

// serveUnix answers each connection with one line; its input is not read.
func (g *gate) serveUnix() error {
	for {
		conn, err := g.unix.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return fmt.Errorf("accept on the gate socket %s: %w", g.unixPath, err)
		}
		go g.answerConn(conn) // ends with the request: the loop answers every held one before it returns
	}
}

func (g *gate) answerConn(conn net.Conn) {
	defer conn.Close()
	// Its input is not read: a client that closes its side after a
	// request line (socat with stdin) must not lose its place; one that
	// went away keeps its slot until the drain ends.
	text := g.request(context.Background(), g.slots)
	conn.SetWriteDeadline(time.Now().Add(time.Second))
	io.WriteString(conn, text+"\n")
}

// serveHTTP answers GET GatePath with 200 and the answer's text. The
// kubelet reads no status code: any answer lets the stop go on.
func (g *gate) serveHTTP() error {
	err := g.http.Serve(g.httpLn)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

func (g *gate) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+GatePath, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, g.request(r.Context(), g.webSlots)+"\n")
	})
	return mux
}

// close stops both listeners; the requests under way end when the loop
// answers them or returned.
func (g *gate) close() {
	if g.unix != nil {
		g.unix.Close()
	}
	if g.http != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		g.http.Shutdown(ctx)
	}
}
