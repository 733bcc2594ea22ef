package supervisor

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// procStat is one process as /proc/<pid>/stat shows it. Its start time (in
// clock ticks after boot) tells a process from a later one that reuses its
// pid: a (pid, start) pair names one process for the life of the host.
type procStat struct {
	pid, ppid, pgid int
	state           byte // R, S, D, Z (zombie: exited, not yet reaped)...
	start           uint64
}

// readStat reads /proc/<pid>/stat under root.
func readStat(root string, pid int) (procStat, error) {
	b, err := os.ReadFile(filepath.Join(root, strconv.Itoa(pid), "stat"))
	if err != nil {
		return procStat{}, err
	}
	return parseStat(b)
}

// parseStat reads "pid (comm) state ppid pgrp session tty tpgid flags
// minflt cminflt majflt cmajflt utime stime cutime cstime priority nice
// num_threads itrealvalue starttime ...": comm may hold spaces and
// parentheses, so the fields are counted from its last ')'.
func parseStat(b []byte) (procStat, error) {
	open, end := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if open < 1 || end < open {
		return procStat{}, fmt.Errorf("parse /proc stat %q: no (comm)", b)
	}
	pid, err := strconv.Atoi(string(bytes.TrimSpace(b[:open])))
	if err != nil {
		return procStat{}, fmt.Errorf("parse /proc stat %q: pid: %w", b, err)
	}
	f := bytes.Fields(b[end+1:])
	// f[0] is the state, f[1] ppid, f[2] pgrp, f[19] starttime.
	if len(f) < 20 || len(f[0]) != 1 {
		return procStat{}, fmt.Errorf("parse /proc stat %q: %d fields after comm, want 20 or more", b, len(f))
	}
	st := procStat{pid: pid, state: f[0][0]}
	if st.ppid, err = strconv.Atoi(string(f[1])); err == nil {
		if st.pgid, err = strconv.Atoi(string(f[2])); err == nil {
			st.start, err = strconv.ParseUint(string(f[19]), 10, 64)
		}
	}
	if err != nil {
		return procStat{}, fmt.Errorf("parse /proc stat %q: %w", b, err)
	}
	return st, nil
}

// listProcs reads every process under root. A process that exits while it
// is read is left out.
func listProcs(root string) ([]procStat, error) {
	ents, err := os.ReadDir(root)
	if err != nil {
		return nil, fmt.Errorf("list processes in %s: %w", root, err)
	}
	out := make([]procStat, 0, len(ents))
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 0 {
			continue
		}
		st, err := readStat(root, pid)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ESRCH) {
				continue
			}
			return nil, err
		}
		out = append(out, st)
	}
	return out, nil
}

// signalProc sends sig to the process (pid, start) and to no later process
// that took its pid: it opens a pidfd, then checks that the process it
// holds still has that start time. It returns false, and no error, when
// the process is gone.
func signalProc(root string, pid int, start uint64, sig unix.Signal) (bool, error) {
	fd, err := unix.PidfdOpen(pid, 0)
	switch {
	case errors.Is(err, unix.ESRCH):
		return false, nil
	case errors.Is(err, unix.ENOSYS):
		return signalProcRacy(root, pid, start, sig) // before Linux 5.3
	case err != nil:
		return false, fmt.Errorf("pidfd_open %d: %w", pid, err)
	}
	defer unix.Close(fd)
	st, err := readStat(root, pid)
	if err != nil || st.start != start {
		return false, nil // gone, or its pid is another's now
	}
	if err := unix.PidfdSendSignal(fd, sig, nil, 0); err != nil {
		if errors.Is(err, unix.ESRCH) {
			return false, nil
		}
		return false, fmt.Errorf("signal %d: %w", pid, err)
	}
	return true, nil
}

// signalProcRacy is signalProc without pidfds: the pid could be reused
// between the check and the kill, a window of microseconds.
func signalProcRacy(root string, pid int, start uint64, sig unix.Signal) (bool, error) {
	if st, err := readStat(root, pid); err != nil || st.start != start {
		return false, nil
	}
	if err := unix.Kill(pid, sig); err != nil {
		if errors.Is(err, unix.ESRCH) {
			return false, nil
		}
		return false, fmt.Errorf("signal %d: %w", pid, err)
	}
	return true, nil
}
