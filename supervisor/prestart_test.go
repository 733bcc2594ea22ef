package supervisor

import (
	"os"
	"syscall"
	"testing"
)

// TestStopBeforeStart: what arrived before HAProxy started, in order; the
// first signal that would stop HAProxy ends hapsuper without starting it,
// reloads and SIGCHLD are dropped, and an empty channel never blocks.
func TestStopBeforeStart(t *testing.T) {
	defaults := signalSet([]syscall.Signal{syscall.SIGTERM, syscall.SIGUSR1})
	tests := []struct {
		name   string
		stops  map[syscall.Signal]bool
		queued []syscall.Signal
		want   syscall.Signal // 0: HAProxy starts
	}{
		{"nothing arrived", defaults, nil, 0},
		{"SIGTERM, a stop signal", defaults, []syscall.Signal{syscall.SIGTERM}, syscall.SIGTERM},
		{"SIGUSR1, the image's STOPSIGNAL", defaults, []syscall.Signal{syscall.SIGUSR1}, syscall.SIGUSR1},
		{"reload and child exit only", defaults, []syscall.Signal{syscall.SIGHUP, syscall.SIGCHLD, syscall.SIGUSR2}, 0},
		{"a stop after a reload", defaults, []syscall.Signal{syscall.SIGHUP, syscall.SIGCHLD, syscall.SIGTERM}, syscall.SIGTERM},
		{"SIGINT, a hard stop", defaults, []syscall.Signal{syscall.SIGINT}, syscall.SIGINT},
		{"SIGQUIT, a hard stop", defaults, []syscall.Signal{syscall.SIGQUIT}, syscall.SIGQUIT},
		{"SIGTERM when only SIGPWR stops: a hard stop", signalSet([]syscall.Signal{syscall.Signal(30)}), []syscall.Signal{syscall.SIGTERM}, syscall.SIGTERM},
		{"SIGPWR configured as a stop signal", signalSet([]syscall.Signal{syscall.Signal(30)}), []syscall.Signal{syscall.SIGHUP, syscall.Signal(30)}, syscall.Signal(30)},
		{"SIGWINCH, not a stop signal", defaults, []syscall.Signal{syscall.SIGWINCH}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sigs := make(chan os.Signal, len(tt.queued))
			for _, s := range tt.queued {
				sigs <- s
			}
			got, ok := stopBeforeStart(sigs, tt.stops)
			if ok != (tt.want != 0) || got != tt.want {
				t.Errorf("stopBeforeStart = %v, %v; want %v, %v", got, ok, tt.want, tt.want != 0)
			}
			if tt.want == 0 && len(sigs) != 0 {
				t.Errorf("%d signals left in the channel; the ones before the start must all be taken", len(sigs))
			}
		})
	}
}
