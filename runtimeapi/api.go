// Package runtimeapi is a client of HAProxy's master CLI (STUB: to be implemented).
package runtimeapi

import (
	"context"
	"time"
)

// Client talks to the master CLI socket. Every call opens one connection,
// sends one command line and reads until the master closes, within Timeout.
type Client struct {
	Socket  string
	Timeout time.Duration
}

// New returns a client of the master socket at path; timeout bounds each call.
func New(path string, timeout time.Duration) *Client { return &Client{Socket: path, Timeout: timeout} }

// Process is one line of `show proc`.
type Process struct {
	PID     int
	Role    string // "master" or "worker"
	Old     bool   // listed under "# old workers"
	Reloads int
	Uptime  string
	Version string
}

// Processes is the result of `show proc`.
type Processes struct {
	Master  Process
	Current []Process // current workers
	Old     []Process // old workers still finishing after a reload or soft stop
}

// Info is the part of `show info` hapsuper uses.
type Info struct {
	PID       int
	Stopping  bool
	CurrConns int64
	CumConns  int64
	CumReq    int64
}

// Frontend is one FRONTEND row of `show stat -1 1 -1`.
type Frontend struct {
	Name   string
	Mode   string // "http", "tcp"
	Status string // OPEN, STOP, ...
	Scur   int64
	Stot   uint64
	ReqTot uint64 // 0 in tcp mode
}

// WorkerSample is one worker's counters from one Sample call.
type WorkerSample struct {
	Process   Process
	Info      Info
	Frontends []Frontend
}

// Sample is one poll of every worker, old ones included.
type Sample struct {
	Master  Process
	Workers []WorkerSample
}

// ShowProc runs `show proc`.
func (c *Client) ShowProc(ctx context.Context) (Processes, error) { return Processes{}, nil }

// ShowInfo runs `@!<pid> show info`.
func (c *Client) ShowInfo(ctx context.Context, pid int) (Info, error) { return Info{}, nil }

// ShowFrontends runs `@!<pid> show stat -1 1 -1`.
func (c *Client) ShowFrontends(ctx context.Context, pid int) ([]Frontend, error) { return nil, nil }

// Reload runs `reload` on the master.
func (c *Client) Reload(ctx context.Context) error { return nil }

// Sample runs show proc, then show info and show stat on every worker.
func (c *Client) Sample(ctx context.Context) (Sample, error) { return Sample{}, nil }
