package supervisor

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/hapsuper/hapsuper/status"
)

// lockFileName is the file in the runtime directory (the status socket's)
// whose lock the running hapsuper holds, with its pid written in it.
const lockFileName = "hapsuper.lock"

// instanceLock is the runtime directory held by this hapsuper: one per
// directory. The images set HAPSUPER_COMPANION in their environment, so a
// `kubectl exec … -- hapsuper` meant as a status query starts a second
// supervisor; without the lock it replaced the first one's sockets and
// started a second HAProxy and controller beside them. The lock is an
// flock: the kernel drops it when the process dies, so a lock file left by
// a killed hapsuper stops nothing.
type instanceLock struct{ f *os.File }

// lockRuntimeDir creates the runtime directory and takes its lock, before
// anything is started or any socket touched. It fails, naming the holder,
// when another hapsuper holds it, or when the master socket answers
// already (a HAProxy master another supervisor started serves it).
func (sv *Supervisor) lockRuntimeDir() (*instanceLock, error) {
	s := sv.settings
	dir := filepath.Dir(s.StatusSocket)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create directory for %s: %w", s.StatusSocket, err)
	}
	l, err := lockInstance(dir)
	if err != nil {
		return nil, err
	}
	if status.SocketAnswers(s.MasterSocket) {
		l.release()
		return nil, fmt.Errorf("the master socket %s answers: a HAProxy master runs already (under another supervisor?): hapsuper will not start a second one; stop it, or give --master-socket another path", s.MasterSocket)
	}
	return l, nil
}

// lockInstance takes the lock of the runtime directory dir and writes this
// process's pid in it.
func lockInstance(dir string) (*instanceLock, error) {
	path := filepath.Join(dir, lockFileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open the instance lock %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder := lockHolder(f)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("another hapsuper (pid %s) runs with the runtime directory %s (it holds %s): use `hapsuper status` to see it, or give this one another runtime directory (--status-socket)", holder, dir, path)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := f.Truncate(0); err != nil {
		f.Close()
		return nil, fmt.Errorf("write the instance lock %s: %w", path, err)
	}
	if _, err := f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0); err != nil {
		f.Close()
		return nil, fmt.Errorf("write the instance lock %s: %w", path, err)
	}
	return &instanceLock{f: f}, nil
}

// lockHolder reads the pid the holder wrote, or "unknown".
func lockHolder(f *os.File) string {
	b := make([]byte, 32)
	n, _ := f.ReadAt(b, 0)
	if pid, err := strconv.Atoi(string(bytes.TrimSpace(b[:n]))); err == nil && pid > 0 {
		return strconv.Itoa(pid)
	}
	return "unknown"
}

// release drops the lock; the file stays, with a pid nobody holds.
func (l *instanceLock) release() { l.f.Close() }
