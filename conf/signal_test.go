package conf

import (
	"strings"
	"syscall"
	"testing"
)

func TestParseSignal(t *testing.T) {
	tests := []struct {
		in      string
		want    syscall.Signal
		wantErr string
	}{
		{in: "SIGTERM", want: syscall.SIGTERM},
		{in: "term", want: syscall.SIGTERM},
		{in: "SigUsr1", want: syscall.SIGUSR1},
		{in: " usr2 ", want: syscall.SIGUSR2},
		{in: "15", want: syscall.SIGTERM},
		{in: "40", want: syscall.Signal(40)},
		{in: "KILL", want: syscall.SIGKILL}, // ParseSignal parses; stop signals refuse it
		{in: "0", wantErr: "out of range"},
		{in: "65", wantErr: "out of range"},
		{in: "SIGNOPE", wantErr: `unknown signal "SIGNOPE"`},
		{in: "", wantErr: "unknown signal"},
	}
	for _, tt := range tests {
		got, err := ParseSignal(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseSignal(%q) = %v, %v; want error containing %q", tt.in, got, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseSignal(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
}

func TestSignalName(t *testing.T) {
	for sig, want := range map[syscall.Signal]string{
		syscall.SIGTERM: "SIGTERM", syscall.SIGUSR1: "SIGUSR1", syscall.SIGHUP: "SIGHUP", 40: "SIG40",
	} {
		if got := SignalName(sig); got != want {
			t.Errorf("SignalName(%d) = %q, want %q", sig, got, want)
		}
	}
}
