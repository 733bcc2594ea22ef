package runtimeapi

import (
	"context"
	"fmt"
	"strconv"
	"strings"
)

// TableEntry is one entry of a stick table keyed by source address, as
// `show table` prints it:
//
//	# table: hapsuper-lb-check, type: ipv6, size:1024, used:1
//	0x55d0c5c2a0f0: key=::ffff:127.0.0.1 use=0 exp=599000 shard=0 http_req_cnt=5 http_req_rate(120000)=5
//
// (shard= from 3.0 on). Only the fields hapsuper stores are read.
type TableEntry struct {
	Key      string
	Requests uint64 // http_req_cnt
	Rate     uint64 // http_req_rate(<period>): requests in the last period
}

// maxTableEntries bounds what is read of a table: a balancer checks from a
// handful of addresses; more is not a balancer's table.
const maxTableEntries = 1024

// ShowTable runs `show table <name>` on worker pid.
func (c *Client) ShowTable(ctx context.Context, pid int, name string) ([]TableEntry, error) {
	reply, err := c.roundTrip(ctx, fmt.Sprintf("@!%d show table %s", pid, name))
	if err != nil {
		return nil, err
	}
	out, err := splitOutputs(reply, 1)
	if err != nil {
		return nil, fmt.Errorf("show table %s on worker %d: %w", name, pid, err)
	}
	entries, err := parseShowTable(out[0], name)
	if err != nil {
		return nil, fmt.Errorf("show table %s on worker %d: %w", name, pid, err)
	}
	return entries, nil
}

// parseShowTable reads the output of `show table <name>`.
func parseShowTable(output, name string) ([]TableEntry, error) {
	lines := strings.Split(strings.TrimRight(output, "\n"), "\n")
	if len(lines) == 0 || !strings.HasPrefix(lines[0], "# table: "+name+",") {
		return nil, unexpected(output, "# table: "+name+", …")
	}
	var out []TableEntry
	for _, line := range lines[1:] {
		if line == "" {
			continue
		}
		if len(out) == maxTableEntries {
			return nil, fmt.Errorf("%w: more than %d entries", ErrCLI, maxTableEntries)
		}
		e, err := parseTableEntry(line)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

// parseTableEntry reads one entry line: `<ptr>: key=<k> name=value …`.
func parseTableEntry(line string) (TableEntry, error) {
	_, rest, ok := strings.Cut(line, ": ")
	if !ok {
		return TableEntry{}, fmt.Errorf("%w: unexpected table line %q", ErrCLI, clip(line))
	}
	var e TableEntry
	for _, f := range strings.Fields(rest) {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			continue
		}
		var err error
		switch {
		case k == "key":
			e.Key = v
		case k == "http_req_cnt":
			e.Requests, err = strconv.ParseUint(v, 10, 64)
		case strings.HasPrefix(k, "http_req_rate("):
			e.Rate, err = strconv.ParseUint(v, 10, 64)
		}
		if err != nil {
			return TableEntry{}, fmt.Errorf("%w: table line %q: %s: %v", ErrCLI, clip(line), k, err)
		}
	}
	if e.Key == "" {
		return TableEntry{}, fmt.Errorf("%w: table line without key: %q", ErrCLI, clip(line))
	}
	return e, nil
}

// SetServerState runs `set server <backend>/<server> state <state>` on
// worker pid; HAProxy answers nothing on success.
func (c *Client) SetServerState(ctx context.Context, pid int, server, state string) error {
	reply, err := c.roundTrip(ctx, fmt.Sprintf("@!%d set server %s state %s", pid, server, state))
	if err != nil {
		return err
	}
	out, err := splitOutputs(reply, 1)
	if err != nil {
		return fmt.Errorf("set server %s on worker %d: %w", server, pid, err)
	}
	if o := strings.TrimSpace(out[0]); o != "" {
		return fmt.Errorf("set server %s on worker %d: %w: %s", server, pid, ErrCLI, firstLine(o))
	}
	return nil
}
