package conf

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"syscall"
	"time"
)

// The flag.Value types below give error messages that say what a good value
// looks like; the flag package and Parse add the flag or variable name.

// durationValue is a time.Duration flag.
type durationValue struct{ d *time.Duration }

func (v durationValue) String() string {
	if v.d == nil {
		return ""
	}
	return v.d.String()
}

func (v durationValue) Set(s string) error {
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		return fmt.Errorf("not a duration: use a number with a unit, such as 30s, 1m30s or 500ms")
	}
	*v.d = d
	return nil
}

// listValue is a comma separated list; empty items are dropped.
type listValue struct{ l *[]string }

func (v listValue) String() string {
	if v.l == nil {
		return ""
	}
	return strings.Join(*v.l, ",")
}

func (v listValue) Set(s string) error {
	var l []string
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			l = append(l, item)
		}
	}
	*v.l = l
	return nil
}

// signalsValue is a comma separated list of stop signals.
type signalsValue struct{ s *[]syscall.Signal }

func (v signalsValue) String() string {
	if v.s == nil {
		return ""
	}
	return signalList(*v.s)
}

func (v signalsValue) Set(s string) error {
	var sigs []syscall.Signal
	for _, item := range strings.Split(s, ",") {
		if strings.TrimSpace(item) == "" {
			continue
		}
		sig, err := parseStopSignal(item)
		if err != nil {
			return err
		}
		sigs = append(sigs, sig)
	}
	if len(sigs) == 0 {
		return fmt.Errorf("no signal given: list at least one, such as SIGTERM,SIGUSR1")
	}
	*v.s = sigs
	return nil
}

func signalList(sigs []syscall.Signal) string {
	names := make([]string, len(sigs))
	for i, sig := range sigs {
		names[i] = SignalName(sig)
	}
	return strings.Join(names, ",")
}

// choiceValue is one word out of a fixed list (log format, routing mode).
type choiceValue struct {
	v       *string
	choices []string
}

func (v choiceValue) String() string {
	if v.v == nil {
		return ""
	}
	return *v.v
}

func (v choiceValue) Set(s string) error {
	w := strings.ToLower(strings.TrimSpace(s))
	if slices.Contains(v.choices, w) {
		*v.v = w
		return nil
	}
	return fmt.Errorf("unknown value %q: use one of %s", s, strings.Join(v.choices, ", "))
}

// levelValue is the log level: debug, info, warn or error.
type levelValue struct{ l *slog.Level }

func (v levelValue) String() string {
	if v.l == nil {
		return ""
	}
	return strings.ToLower(v.l.String())
}

func (v levelValue) Set(s string) error {
	levels := map[string]slog.Level{
		"debug": slog.LevelDebug, "info": slog.LevelInfo,
		"warn": slog.LevelWarn, "error": slog.LevelError,
	}
	l, ok := levels[strings.ToLower(strings.TrimSpace(s))]
	if !ok {
		return fmt.Errorf("unknown log level: use debug, info, warn or error")
	}
	*v.l = l
	return nil
}
