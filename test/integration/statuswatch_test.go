package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"os/exec"
	"slices"
	"syscall"
	"testing"
	"time"
)

// TestStatus_WatchFollowsTheDrain: `hapsuper status --watch --json` prints
// a document per refresh through serving, draining and stopping, and ends
// by itself, exit 0, once the supervisor has exited, with a last document
// of phase exited that carries the drain's reason.
func TestStatus_WatchFollowsTheDrain(t *testing.T) {
	eachHAProxy(t, func(t *testing.T, h haproxyVersion) {
		cfg := newConfig(t)
		s := serve(t, h, cfg, fast.flags()...)
		s.waitWorkers()

		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		watch := exec.CommandContext(ctx, hapsuperBin(t), "status", "--socket", s.status, "--watch", "--json", "--interval", "100ms")
		out, err := watch.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var errb limitedBuffer
		watch.Stderr = &errb
		if err := watch.Start(); err != nil {
			t.Fatal(err)
		}
		var phases []string
		var last statusDoc
		docs := 0
		scanned := make(chan struct{})
		go func() { // ends when the watch closes its stdout
			defer close(scanned)
			sc := bufio.NewScanner(out)
			sc.Buffer(make([]byte, 64<<10), 1<<20)
			for sc.Scan() {
				var d statusDoc
				if err := json.Unmarshal(sc.Bytes(), &d); err != nil {
					t.Errorf("watch printed a line that is not a status document: %q", sc.Text())
					continue
				}
				docs++
				last = d
				if len(phases) == 0 || phases[len(phases)-1] != d.Phase {
					phases = append(phases, d.Phase)
				}
			}
		}()

		time.Sleep(500 * time.Millisecond)
		r := s.drain(cfg.webAddr(), syscall.SIGTERM, func(*drainRun) { time.Sleep(500 * time.Millisecond) })
		<-scanned // every line read before Wait closes the pipe (os/exec's StdoutPipe rule)
		werr := watch.Wait()
		t.Logf("watch: %d documents, phases %v; supervisor exit %d; watch ended %s after it (%v): %s",
			docs, phases, r.code, time.Since(r.exitAt).Round(time.Millisecond), werr, errb.String())
		if werr != nil {
			t.Errorf("status --watch ended with %v, want exit 0 when the supervisor exits", werr)
		}
		for _, want := range []string{"serving", "draining"} {
			if !slices.Contains(phases, want) {
				t.Errorf("watch never showed phase %q: %v", want, phases)
			}
		}
		if last.Phase != "exited" || last.Drain == nil || last.Drain.Reason == "" {
			t.Errorf("the last document is not the exit with the drain's reason: %+v", last)
		}
		if docs < 10 {
			t.Errorf("%d documents in over 2 s at a 100 ms interval", docs)
		}
	})
}
