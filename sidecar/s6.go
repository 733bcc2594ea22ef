package sidecar

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// s6Control returns the soft stop of the s6 service at dir, as `s6-svc
// -O -1 dir` sends it: "O" (once at most: not restarted when it exits) and
// "1" (SIGUSR1, HAProxy's soft stop) written to the FIFO its s6-supervise
// reads, dir/supervise/control. HAProxy Technologies' s6-overlay images
// hard-stop HAProxy on the container's stop signal; done this way the soft
// stop needs neither a shared PID namespace nor a tool in HAProxy's image,
// only dir on a volume both containers mount (/run there).
func s6Control(dir string) func() error {
	return func() error {
		path := filepath.Join(dir, "supervise", "control")
		// Non-blocking: without a reader (no s6-supervise) the open fails
		// with ENXIO instead of waiting.
		f, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0)
		if err != nil {
			return fmt.Errorf("open s6 control %s: %w (is s6-supervise running the service, and is --s6-service on a volume this container mounts?)", path, err)
		}
		defer f.Close()
		if _, err := f.WriteString("O1"); err != nil {
			return fmt.Errorf("write to s6 control %s: %w", path, err)
		}
		return nil
	}
}
