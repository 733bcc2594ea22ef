package k8stest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

const netnsDir = "/var/run/netns"

// ip runs one iproute2 command and returns its error with its output.
func ip(args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// ipAll runs iproute2 commands in order and stops at the first error.
func ipAll(cmds ...[]string) error {
	for _, args := range cmds {
		if err := ip(args...); err != nil {
			return err
		}
	}
	return nil
}

// inNetNS runs fn on an OS thread switched into the named network namespace.
// Sockets fn creates belong to that namespace for their whole life, whichever
// thread later uses them. fn must not start goroutines that create sockets.
func inNetNS(name string, fn func() error) error {
	target, err := os.Open(filepath.Join(netnsDir, name))
	if err != nil {
		return fmt.Errorf("open network namespace %s: %w", name, err)
	}
	defer target.Close()
	runtime.LockOSThread()
	orig, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("open own network namespace: %w", err)
	}
	defer orig.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("enter network namespace %s: %w", name, err)
	}
	fnErr := fn()
	if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
		// Leave the thread locked: it ends with this goroutine instead of
		// running others in the wrong namespace.
		return fmt.Errorf("leave network namespace %s: %w", name, err)
	}
	runtime.UnlockOSThread()
	return fnErr
}

// writeSysctl sets a /proc/sys/net value inside the named namespace.
func writeSysctl(netns, key, value string) error {
	path := filepath.Join("/proc/sys", strings.ReplaceAll(key, ".", "/"))
	return inNetNS(netns, func() error {
		if err := os.WriteFile(path, []byte(value), 0o644); err != nil {
			return fmt.Errorf("set %s=%s in %s: %w", key, value, netns, err)
		}
		return nil
	})
}

// dialIn returns a DialContext that opens connections from inside netns.
func dialIn(netns string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		var conn net.Conn
		err := inNetNS(netns, func() error {
			var err error
			conn, err = dialFrom(ctx, netns, network, addr)
			return err
		})
		return conn, err
	}
}

// listenIn opens a listener inside netns.
func listenIn(netns, network, addr string) (net.Listener, error) {
	var ln net.Listener
	err := inNetNS(netns, func() error {
		var err error
		ln, err = net.Listen(network, addr)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("listen on %s %s in %s: %w", network, addr, netns, err)
	}
	return ln, nil
}

// deleteNetNS kills whatever still runs inside the namespace, then deletes
// it (which removes its interfaces, routes and firewall rules).
func deleteNetNS(name string) error {
	if _, err := os.Stat(filepath.Join(netnsDir, name)); os.IsNotExist(err) {
		return nil
	}
	if out, err := exec.Command("ip", "netns", "pids", name).Output(); err == nil {
		for _, f := range strings.Fields(string(out)) {
			var pid int
			// Never this process: a thread of it may sit in the namespace.
			if _, err := fmt.Sscan(f, &pid); err == nil && pid > 0 && pid != os.Getpid() {
				_ = unix.Kill(pid, unix.SIGKILL)
			}
		}
	}
	return ip("netns", "delete", name)
}
