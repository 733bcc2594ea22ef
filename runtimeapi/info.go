package runtimeapi

import (
	"fmt"
	"strconv"
	"strings"
)

// Info is the part of `show info` hapsuper uses.
type Info struct {
	PID       int
	Stopping  bool
	CurrConns int64
	CumConns  int64
	CumReq    int64
}

func infoCommand(pid int) string { return fmt.Sprintf("@!%d show info", pid) }

// parseShowInfo parses "Name: value" lines. Every field of Info is required,
// and Pid must be the worker asked (0 accepts any).
func parseShowInfo(output string, pid int) (Info, error) {
	fields := map[string]string{}
	for line := range strings.SplitSeq(strings.TrimSuffix(output, "\n"), "\n") {
		if name, value, ok := strings.Cut(line, ": "); ok {
			fields[name] = value
		}
	}
	if _, ok := fields["Name"]; !ok {
		return Info{}, unexpected(output, `"Name: HAProxy"`)
	}
	var info Info
	var pidN, stopping int64
	for _, f := range []struct {
		name string
		dst  *int64
	}{{"Pid", &pidN}, {"Stopping", &stopping}, {"CurrConns", &info.CurrConns}, {"CumConns", &info.CumConns}, {"CumReq", &info.CumReq}} {
		v, ok := fields[f.name]
		if !ok {
			return Info{}, fmt.Errorf("no %s field", f.name)
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return Info{}, fmt.Errorf("field %s: %q is not a number", f.name, clip(v))
		}
		*f.dst = n
	}
	info.PID, info.Stopping = int(pidN), stopping != 0
	if pid != 0 && info.PID != pid {
		return Info{}, fmt.Errorf("answer is for pid %d, asked %d", info.PID, pid)
	}
	return info, nil
}
