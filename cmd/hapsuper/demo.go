package main

import (
	_ "embed"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

//go:embed demo.cfg
var demoConfig []byte

// demoCommand runs hapsuper on its embedded example: HAProxy answering on
// 127.0.0.1:8080, sockets in a temporary directory, Ctrl-C starting a drain.
// Flags given to it override the demo's defaults.
func demoCommand(args []string, stdout, stderr io.Writer) int {
	dir, err := os.MkdirTemp("", "hapsuper-demo-")
	if err != nil {
		fmt.Fprintf(stderr, "hapsuper demo: create a temporary directory: %v\n", err)
		return 1
	}
	defer os.RemoveAll(dir)
	cfg := filepath.Join(dir, "haproxy.cfg")
	if err := os.WriteFile(cfg, demoConfig, 0o644); err != nil {
		fmt.Fprintf(stderr, "hapsuper demo: write %s: %v\n", cfg, err)
		return 1
	}
	status := filepath.Join(dir, "status.sock")
	fmt.Fprintf(stdout, `hapsuper demo: HAProxy on http://127.0.0.1:8080 (probes on :8081, not counted)
  try:    curl -s http://127.0.0.1:8080/
  status: go run ./cmd/hapsuper status --socket %s
  stop:   Ctrl-C or kill -TERM %d starts the drain; it ends 2s after the last request
`, status, os.Getpid())
	demo := []string{
		"--grace-period", "15s",
		"--quiet-period", "2s",
		"--ignore-frontends", "probes",
		"--stop-signals", "SIGTERM,SIGUSR1,SIGINT",
		"--master-socket", filepath.Join(dir, "master.sock"),
		"--status-socket", status,
		"--override-file", filepath.Join(dir, "override.cfg"),
	}
	return runCommand(append(append(demo, args...), "--", "haproxy", "-f", cfg), stderr)
}
