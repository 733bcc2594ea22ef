package conf

import (
	"fmt"
	"strconv"
	"strings"
	"syscall"
)

// signalNames maps Linux signal names, without the SIG prefix, to numbers.
var signalNames = map[string]syscall.Signal{
	"HUP": syscall.SIGHUP, "INT": syscall.SIGINT, "QUIT": syscall.SIGQUIT,
	"ILL": syscall.SIGILL, "TRAP": syscall.SIGTRAP, "ABRT": syscall.SIGABRT,
	"BUS": syscall.SIGBUS, "FPE": syscall.SIGFPE, "KILL": syscall.SIGKILL,
	"USR1": syscall.SIGUSR1, "SEGV": syscall.SIGSEGV, "USR2": syscall.SIGUSR2,
	"PIPE": syscall.SIGPIPE, "ALRM": syscall.SIGALRM, "TERM": syscall.SIGTERM,
	"STKFLT": syscall.Signal(16), "CHLD": syscall.SIGCHLD, "CONT": syscall.SIGCONT,
	"STOP": syscall.SIGSTOP, "TSTP": syscall.SIGTSTP, "TTIN": syscall.SIGTTIN,
	"TTOU": syscall.SIGTTOU, "URG": syscall.SIGURG, "XCPU": syscall.SIGXCPU,
	"XFSZ": syscall.SIGXFSZ, "VTALRM": syscall.SIGVTALRM, "PROF": syscall.SIGPROF,
	"WINCH": syscall.SIGWINCH, "IO": syscall.SIGIO, "PWR": syscall.Signal(30),
	"SYS": syscall.Signal(31),
}

// maxSignal is the highest Linux signal number (SIGRTMAX).
const maxSignal = 64

// ParseSignal reads a signal given as a name with or without the SIG prefix,
// in any case ("SIGTERM", "term", "usr1"), or as a number ("15"). It accepts
// every Linux signal; callers decide which ones make sense.
func ParseSignal(s string) (syscall.Signal, error) {
	name := strings.ToUpper(strings.TrimSpace(s))
	if n, err := strconv.Atoi(name); err == nil {
		if n < 1 || n > maxSignal {
			return 0, fmt.Errorf("signal number %d is out of range: use 1 to %d or a name such as SIGTERM", n, maxSignal)
		}
		return syscall.Signal(n), nil
	}
	if sig, ok := signalNames[strings.TrimPrefix(name, "SIG")]; ok {
		return sig, nil
	}
	return 0, fmt.Errorf("unknown signal %q: use a name such as SIGTERM or USR1, or a number", s)
}

// SignalName returns the conventional name of sig ("SIGTERM"), or its number
// ("SIG40") when it has none.
func SignalName(sig syscall.Signal) string {
	for name, n := range signalNames {
		if n == sig {
			return "SIG" + name
		}
	}
	return "SIG" + strconv.Itoa(int(sig))
}

// parseStopSignal reads one stop signal and refuses those that cannot serve:
// SIGKILL and SIGSTOP cannot be caught, SIGCHLD belongs to the reaper, and
// the Go runtime raises or uses some by itself (SIGURG preempts goroutines,
// SIGPIPE comes with a write to a closed pipe, SIGPROF with profiling, the
// fault signals with a crash), so a drain would start with no one asking.
func parseStopSignal(s string) (syscall.Signal, error) {
	sig, err := ParseSignal(s)
	if err != nil {
		return 0, err
	}
	switch sig {
	case syscall.SIGURG, syscall.SIGPIPE, syscall.SIGPROF, syscall.SIGSEGV, syscall.SIGBUS, syscall.SIGFPE, syscall.SIGILL, syscall.SIGTRAP, syscall.SIGSYS:
		return 0, fmt.Errorf("%s is raised by the Go runtime or the kernel on its own (preemption, broken pipes, profiling, faults), so it would start drains nobody asked for: use SIGTERM or SIGUSR1", SignalName(sig))
	case syscall.SIGKILL, syscall.SIGSTOP:
		return 0, fmt.Errorf("%s cannot be caught, so it cannot start a drain: use SIGTERM or SIGUSR1", SignalName(sig))
	case syscall.SIGCHLD:
		return 0, fmt.Errorf("SIGCHLD reports exited children to the reaper, it cannot start a drain: use SIGTERM or SIGUSR1")
	}
	return sig, nil
}
