package main

import (
	_ "embed"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

//go:embed demo.cfg
var demoConfig []byte

// demoAddr is where demo.cfg's web frontend listens.
const demoAddr = "http://127.0.0.1:8080"

// demoArgs are the run flags the demo sets, with its files in dir; flags the
// user gives come after them and win.
func demoArgs(dir string) []string {
	return []string{
		"--grace-period", "15s",
		"--quiet-period", "2s",
		"--ignore-frontends", "probes",
		"--stop-signals", "SIGTERM,SIGUSR1,SIGINT",
		"--master-socket", filepath.Join(dir, "master.sock"),
		"--status-socket", filepath.Join(dir, "status.sock"),
		"--override-file", filepath.Join(dir, "override.cfg"),
	}
}

// demoAbout is the demo's help paragraph, with the flags it sets.
func demoAbout() string {
	var b strings.Builder
	b.WriteString("Runs hapsuper on an embedded example: HAProxy answering on " + demoAddr + "\n" +
		"(probes on :8081, not counted), sockets in a temporary directory; Ctrl-C starts a drain.\n" +
		"It takes run's flags. It sets these, and a flag you give wins:")
	args := demoArgs("$TMPDIR")
	for i := 0; i+1 < len(args); i += 2 {
		b.WriteString("\n  " + args[i] + " " + args[i+1])
	}
	return b.String()
}

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
	all := append(append(demoArgs(dir), args...), "--", "haproxy", "-f", cfg)
	s, code, done := parseRun("demo", all, stdout, stderr)
	if done {
		return code
	}
	if err := os.WriteFile(cfg, demoConfig, 0o644); err != nil {
		fmt.Fprintf(stderr, "hapsuper demo: write %s: %v\n", cfg, err)
		return 1
	}
	fmt.Fprintf(stdout, `hapsuper demo: HAProxy on %s (probes on :8081, not counted)
  try:    curl -s %s/
  status: go run ./cmd/hapsuper status --socket %s
  stop:   Ctrl-C or kill -TERM %d starts the drain; it ends %s after the last request
`, demoAddr, demoAddr, s.StatusSocket, os.Getpid(), s.QuietPeriod)
	return supervise(s, stderr)
}
