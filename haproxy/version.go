package haproxy

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Version is an HAProxy build as the first line of `haproxy -v` (or
// `-vv`) names it, "HAProxy version 3.2.26-1 2026/10/14 - https://haproxy.org/",
// and, from the rest of `-vv`, whether it was built with USE_SYSTEMD. It is
// the one place that reads HAProxy's version: what hapsuper does differently
// per version (readiness, the regressions `hapsuper check` warns about) is
// decided from it.
type Version struct {
	Major, Minor, Patch int
	// Suffix is what follows major.minor[.patch] in the version word: a
	// distribution's revision ("-1+deb12u4"), a development tag ("-dev5")
	// or a commit of a source build; "" for a release built from its tarball.
	Suffix string
	// Dev is set for a development branch ("3.5-dev5"), which has no patch
	// level: the regressions of releases are not judged on it.
	Dev bool
	// Systemd is set when `-vv` lists USE_SYSTEMD=1 or +SYSTEMD (3.0 and
	// older name it; 3.1 removed the option, its support is built in).
	Systemd bool
	// Line is the first line, as HAProxy printed it.
	Line string
}

// versionLine matches the first line of `haproxy -v`; "HA-Proxy" is how
// 2.0 and older spell it.
var versionLine = regexp.MustCompile(`^HA-?Proxy version (\d+)\.(\d+)(?:\.(\d+))?(\S*)`)

// ParseVersion reads the output of `haproxy -v` or `haproxy -vv`.
func ParseVersion(out string) (Version, error) {
	first, rest, _ := strings.Cut(out, "\n")
	first = strings.TrimSpace(first)
	m := versionLine.FindStringSubmatch(first)
	if m == nil {
		return Version{}, fmt.Errorf("read HAProxy's version: its first line is %q, not \"HAProxy version X.Y.Z ...\": check that the binary after -- is HAProxy", first)
	}
	v := Version{Suffix: m[4], Line: first}
	v.Major, _ = strconv.Atoi(m[1])
	v.Minor, _ = strconv.Atoi(m[2])
	if m[3] != "" {
		v.Patch, _ = strconv.Atoi(m[3])
	} else {
		v.Dev = strings.HasPrefix(v.Suffix, "-dev")
	}
	v.Systemd = strings.Contains(rest, "USE_SYSTEMD=1") || strings.Contains(rest, "+SYSTEMD")
	return v, nil
}

// Branch is major.minor: "3.2".
func (v Version) Branch() string { return fmt.Sprintf("%d.%d", v.Major, v.Minor) }

// String is the version without the date: "3.2.26-1", "3.5-dev5".
func (v Version) String() string {
	if v.Dev {
		return v.Branch() + v.Suffix
	}
	return fmt.Sprintf("%d.%d.%d%s", v.Major, v.Minor, v.Patch, v.Suffix)
}

// AtLeast reports whether v is major.minor.patch or later. A development
// version counts as its branch's .0.
func (v Version) AtLeast(major, minor, patch int) bool {
	switch {
	case v.Major != major:
		return v.Major > major
	case v.Minor != minor:
		return v.Minor > minor
	}
	return v.Patch >= patch
}

// SupportsNotify reports whether the build handles -Ws and NOTIFY_SOCKET:
// builds of 3.0 and older only with USE_SYSTEMD, every build from 3.1 on
// (3.1 removed the USE_SYSTEMD build option: -Ws is part of every build).
func (v Version) SupportsNotify() bool {
	return v.Systemd || v.AtLeast(3, 1, 0)
}

// Regression is a known upstream bug of a range of patch releases of one
// branch that breaks what hapsuper relies on: releases Major.Minor.First
// to Major.Minor.(Fixed-1) have it, Major.Minor.Fixed is the first
// without it.
type Regression struct {
	Major, Minor int
	First, Fixed int // patch levels
	// Breaks says what goes wrong, for an operator.
	Breaks string
}

// FixedIn is the first release of the branch without the bug: "3.2.11".
func (r Regression) FixedIn() string { return fmt.Sprintf("%d.%d.%d", r.Major, r.Minor, r.Fixed) }

// Affected is the range of releases with the bug: "3.2.9–3.2.10".
func (r Regression) Affected() string {
	if r.First == r.Fixed-1 {
		return fmt.Sprintf("%d.%d.%d", r.Major, r.Minor, r.First)
	}
	return fmt.Sprintf("%d.%d.%d–%d.%d.%d", r.Major, r.Minor, r.First, r.Major, r.Minor, r.Fixed-1)
}

// KnownRegressions are the known upstream regressions, as minimum patch
// levels per branch, each read in HAProxy's own changelogs and commits.
// 3.4.0 has every fix below. Only the 3.2 and 3.3 ranges were checked:
// 3.1, whose master-worker model 3.2 inherits, is not judged, and the
// commit that fixed the thread bug says the change it repairs had reached
// every stable branch.
var KnownRegressions = []Regression{
	{Major: 3, Minor: 2, First: 0, Fixed: 5, Breaks: "with several threads, a soft stop or reload lets threads quit before their connections are done: clients see broken connections during the drain"},
	{Major: 3, Minor: 2, First: 9, Fixed: 11, Breaks: signalsBlocked},
	{Major: 3, Minor: 3, First: 0, Fixed: 2, Breaks: signalsBlocked},
	{Major: 3, Minor: 2, First: 0, Fixed: 15, Breaks: "`@!<pid>` to a worker that is still starting makes the master loop on \"socketpair: Cannot transfer the fd\": polling the workers during a reload can stall"},
}

const signalsBlocked = "after a failed reload the master leaves every signal pending: a later reload (SIGUSR2, SIGHUP), the soft stop (SIGUSR1) and the hard stop (SIGTERM) are never taken, and only SIGKILL at the deadline ends HAProxy"

// Regressions returns the known regressions v has, in the order of
// KnownRegressions. A development version has none that are known.
func (v Version) Regressions() []Regression {
	if v.Dev {
		return nil
	}
	var rs []Regression
	for _, r := range KnownRegressions {
		if v.Major == r.Major && v.Minor == r.Minor && v.Patch >= r.First && v.Patch < r.Fixed {
			rs = append(rs, r)
		}
	}
	return rs
}
