package runtimeapi

import (
	"context"
	"fmt"
	"strconv"
	"strings"
)

// Process is one line of `show proc`.
type Process struct {
	PID     int
	Role    string // "master" or "worker"
	Old     bool   // listed under "# old workers"
	Reloads int
	// FailedReloads is the master's "[failed: N]": reloads that failed since
	// the last successful one, the sign that a reload (SIGUSR2 to the master)
	// did not load its configuration. Zero for workers.
	FailedReloads int
	Uptime        string
	Version       string
}

// Processes is the result of `show proc`.
type Processes struct {
	Master  Process
	Current []Process // current workers
	Old     []Process // old workers still finishing after a reload or soft stop
}

// ShowProc runs `show proc`.
func (c *Client) ShowProc(ctx context.Context) (Processes, error) {
	reply, err := c.roundTrip(ctx, "show proc")
	if err != nil {
		return Processes{}, fmt.Errorf("show proc on master: %w", err)
	}
	procs, err := parseShowProcReply(reply)
	if err != nil {
		return Processes{}, fmt.Errorf("show proc on master: %w", err)
	}
	return procs, nil
}

func parseShowProcReply(reply string) (Processes, error) {
	outputs, err := splitOutputs(reply, 1)
	if err != nil {
		return Processes{}, err
	}
	return parseShowProc(outputs[0])
}

// parseShowProc parses one `show proc` output: a header line, the master,
// then the "# workers", "# old workers", "# programs" and "# old programs"
// sections. Programs are skipped; an unknown section is an error, so that a
// format change cannot hide old workers.
func parseShowProc(output string) (Processes, error) {
	lines := strings.Split(strings.TrimSuffix(output, "\n"), "\n")
	if !strings.HasPrefix(lines[0], "#<PID>") {
		return Processes{}, unexpected(output, `"#<PID>" header`)
	}
	var procs Processes
	section := "master"
	for i, line := range lines[1:] {
		if name, ok := strings.CutPrefix(line, "# "); ok {
			switch name {
			case "workers", "old workers", "programs", "old programs":
				section = name
			default:
				return Processes{}, fmt.Errorf("line %d: unknown section %q", i+2, firstLine(line))
			}
			continue
		}
		if section == "programs" || section == "old programs" {
			continue
		}
		p, err := parseProcLine(line)
		if err != nil {
			return Processes{}, fmt.Errorf("line %d: %w", i+2, err)
		}
		switch {
		case section == "master" && p.Role == "master" && procs.Master.PID == 0:
			procs.Master = p
		case section == "workers" && p.Role == "worker":
			procs.Current = append(procs.Current, p)
		case section == "old workers" && p.Role == "worker":
			p.Old = true
			procs.Old = append(procs.Old, p)
		default:
			return Processes{}, fmt.Errorf("line %d: unexpected %s %q in section %q", i+2, clip(p.Role), firstLine(line), section)
		}
	}
	if procs.Master.PID == 0 {
		return Processes{}, fmt.Errorf("no master line in %q", firstLine(output))
	}
	return procs, nil
}

// parseProcLine parses "<pid> <type> <reloads> [failed: N] <uptime> <version>"
// (the "[failed: N]" part only on the master line).
func parseProcLine(line string) (Process, error) {
	f := strings.Fields(line)
	if len(f) < 5 {
		return Process{}, fmt.Errorf("process line %q has %d fields, want at least 5", firstLine(line), len(f))
	}
	pid, err := strconv.Atoi(f[0])
	if err != nil || pid <= 0 {
		return Process{}, fmt.Errorf("process line %q: bad pid %q", firstLine(line), clip(f[0]))
	}
	reloads, err := strconv.Atoi(f[2])
	if err != nil {
		return Process{}, fmt.Errorf("process line %q: bad reloads %q", firstLine(line), clip(f[2]))
	}
	p := Process{PID: pid, Role: f[1], Reloads: reloads, Uptime: f[len(f)-2], Version: f[len(f)-1]}
	switch {
	case len(f) == 7 && f[3] == "[failed:" && strings.HasSuffix(f[4], "]"):
		if p.FailedReloads, err = strconv.Atoi(strings.TrimSuffix(f[4], "]")); err != nil {
			return Process{}, fmt.Errorf("process line %q: bad failed count %q", firstLine(line), clip(f[4]))
		}
	case len(f) != 5:
		return Process{}, fmt.Errorf("process line %q has %d fields, want 5 (or 7 for the master)", firstLine(line), len(f))
	}
	return p, nil
}
