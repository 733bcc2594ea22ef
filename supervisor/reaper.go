package supervisor

import (
	"errors"
	"log/slog"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// becomeSubreaper makes orphans of HAProxy (and of anything it starts)
// hapsuper's children when hapsuper is not PID 1, so that they are reaped
// here and not by a host init that never sees them.
func becomeSubreaper() error {
	if os.Getpid() == 1 {
		return nil
	}
	return unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
}

// reapAll collects every child that has exited, orphans included, and
// returns the master's wait status if the master was among them, and the
// exit codes of the others by pid (a reload's haproxy -c among them). It is
// the only place in the process that waits: running it beside cmd.Wait
// would steal statuses.
func reapAll(master int, log *slog.Logger) (status syscall.WaitStatus, masterExited bool, others map[int]int) {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil || pid <= 0 { // ECHILD: no children left; 0: none exited
			return status, masterExited, others
		}
		if pid == master {
			status, masterExited = ws, true
			continue
		}
		log.Debug("reaped", "pid", pid, "code", exitCode(ws))
		if others == nil {
			others = map[int]int{}
		}
		others[pid] = exitCode(ws)
	}
}
