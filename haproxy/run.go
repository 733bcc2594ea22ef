package haproxy

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"syscall"
	"time"
)

// maxHAProxyOutput bounds what RunHAProxy keeps of a command's output.
const maxHAProxyOutput = 1 << 20

// RunHAProxy runs path with args (`haproxy -vv`, `haproxy -c ...`) and
// returns its stdout and stderr together, within timeout whatever it does:
// it runs in its own process group, which is SIGKILLed at the timeout, so
// a child it left holding the output cannot keep the call waiting (the
// pipes are given up a second later), and at most maxHAProxyOutput bytes
// are kept. A run cut by the timeout returns context.DeadlineExceeded.
// It waits for its child itself: call it before a reaper owns every wait.
func RunHAProxy(ctx context.Context, timeout time.Duration, path string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second
	var out capped
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // whatever the group left behind
	}
	if ctx.Err() != nil {
		return out.Bytes(), context.DeadlineExceeded
	}
	if errors.Is(err, exec.ErrWaitDelay) {
		err = nil // it exited 0; a child of its kept the output open
	}
	return out.Bytes(), err
}

// capped keeps the first maxHAProxyOutput bytes written to it.
type capped struct{ bytes.Buffer }

func (c *capped) Write(p []byte) (int, error) {
	if room := maxHAProxyOutput - c.Len(); room > 0 {
		c.Buffer.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}
