package haproxy

import (
	"slices"
	"strconv"
)

// WithMemoryLimit returns argv with `-m <megabytes>` after the binary, the
// cap HAProxy puts on its own allocations (gopherd's images pass
// `-m {{mem 66%}}`). A command that already has -m keeps its own, and
// megabytes ≤ 0 (no limit known) adds nothing.
func WithMemoryLimit(argv []string, megabytes int64) []string {
	if megabytes <= 0 || len(argv) == 0 || slices.Contains(argv[1:], "-m") {
		return argv
	}
	out := append([]string{argv[0], "-m", strconv.FormatInt(megabytes, 10)}, argv[1:]...)
	return out
}

// MemoryShare is percent of limit bytes in whole megabytes (MiB, as HAProxy's
// -m and Go's GOMEMLIMIT count them), rounded down; 0 when either is 0.
func MemoryShare(limit int64, percent int) int64 {
	if limit <= 0 || percent <= 0 {
		return 0
	}
	p := int64(percent)
	share := limit/100*p + limit%100*p/100 // limit*p/100 without overflow
	return share >> 20
}
