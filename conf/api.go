// Package conf holds hapsuper's settings (STUB: to be implemented).
package conf

import (
	"log/slog"
	"syscall"
	"time"
)

// Settings is everything `hapsuper run` needs, validated.
type Settings struct {
	GracePeriod     time.Duration
	QuietPeriod     time.Duration
	MaxWait         time.Duration
	Margin          time.Duration
	PollInterval    time.Duration
	IgnoreFrontends []string
	MasterSocket    string // the -S path HAProxy listens on (user's own -S reused)
	StatusSocket    string
	OverrideFile    string
	StopSignals     []syscall.Signal
	LogFormat       string // "text" or "json"
	LogLevel        slog.Level
	HAProxy         []string // the user's argv after "--" (or the default), binary first
}

// Parse reads the run command's flags (args, without the program name) and
// HAPSUPER_* variables from getenv; a flag wins over its variable.
func Parse(args []string, getenv func(string) string) (Settings, error) { return Settings{}, nil }

// Command returns HAProxy's argv: the user's, plus -W (or -Ws when notify),
// -db, -S <MasterSocket>,mode,600,level,admin where missing, and -f OverrideFile last.
func (s Settings) Command(notify bool) []string { return nil }

// ConfigFiles returns the configuration files named by -f in the HAProxy argv
// (a directory means its *.cfg files, in lexical order).
func (s Settings) ConfigFiles() ([]string, error) { return nil, nil }

// Frontend is one frontend of the user's configuration.
type Frontend struct {
	Name string
	Mode string
}

// Inspection is what hapsuper learned from the user's HAProxy configuration.
type Inspection struct {
	Frontends     []Frontend
	HardStopAfter time.Duration // 0 when unset
	Warnings      []string      // each says what to change
}

// Inspect reads the configuration files read-only and checks them against s.
// Unknown names in IgnoreFrontends are an error.
func Inspect(files []string, s Settings) (Inspection, error) { return Inspection{}, nil }

// WriteOverride writes the override file: a global section with hard-stop-after.
func WriteOverride(s Settings) error { return nil }
