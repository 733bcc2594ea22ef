package main

import (
	_ "embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/hapsuper/hapsuper/conf"
	"github.com/hapsuper/hapsuper/supervisor"
)

//go:embed demo.cfg
var demoConfig []byte

// The demo's ports: these when they are free, else ports the kernel picks.
const (
	demoWebPort    = 8080
	demoProbesPort = 8081
)

// demoPorts returns the web and probes ports for the demo: wantWeb and
// wantProbes (8080 and 8081) when both are free on 127.0.0.1, else two free
// ones. A port is free when it can be bound; it is released at once for
// HAProxy, which binds it a few milliseconds later.
func demoPorts(wantWeb, wantProbes int) (web, probes int, err error) {
	free := func(port int) (int, error) {
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			return 0, err
		}
		defer ln.Close()
		return ln.Addr().(*net.TCPAddr).Port, nil
	}
	if _, err := free(wantWeb); err == nil {
		if _, err := free(wantProbes); err == nil {
			return wantWeb, wantProbes, nil
		}
	}
	if web, err = free(0); err != nil {
		return 0, 0, fmt.Errorf("find a free port on 127.0.0.1: %w", err)
	}
	for probes == 0 || probes == web {
		if probes, err = free(0); err != nil {
			return 0, 0, fmt.Errorf("find a free port on 127.0.0.1: %w", err)
		}
	}
	return web, probes, nil
}

// demoConfigFor is demo.cfg with its ports.
func demoConfigFor(web, probes int) []byte {
	return []byte(strings.NewReplacer("WEB_PORT", strconv.Itoa(web), "PROBES_PORT", strconv.Itoa(probes)).Replace(string(demoConfig)))
}

// selfCommand is how the user ran this binary, for the commands the demo
// suggests: "go run ./cmd/hapsuper" for a binary go run built.
func selfCommand() string {
	if strings.Contains(os.Args[0], "go-build") {
		return "go run ./cmd/hapsuper"
	}
	return os.Args[0]
}

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
	b.WriteString("Runs hapsuper on an embedded example: HAProxy answering on http://127.0.0.1:8080\n" +
		"(probes on :8081, not counted), or on two free ports when those are taken (its first line\n" +
		"says which), sockets in a temporary directory; Ctrl-C starts a drain, Ctrl-\\ stops at once.\n" +
		"HAProxy is haproxy on the PATH, or the words after -- (or --haproxy-command): its binary\n" +
		"and arguments, to which the demo adds -f <its configuration>.\n" +
		"It takes run's flags. It sets these, and a flag you give wins:")
	args := demoArgs("$TMPDIR")
	for i := 0; i+1 < len(args); i += 2 {
		b.WriteString("\n  " + args[i] + " " + args[i+1])
	}
	return b.String()
}

// demoCommand runs hapsuper on its embedded example: HAProxy answering on
// 127.0.0.1:8080, or free ports, sockets in a temporary directory, Ctrl-C
// starting a drain. Flags given to it override the demo's defaults; the
// words after -- (or --haproxy-command) are HAProxy's binary and arguments,
// to which the demo adds its -f. HAProxy is looked for before anything is
// printed on stdout.
func demoCommand(args []string, stdout, stderr io.Writer) int {
	dir, err := os.MkdirTemp("", "hapsuper-demo-")
	if err != nil {
		fmt.Fprintf(stderr, "hapsuper demo: create a temporary directory: %v (set TMPDIR to a writable directory)\n", err)
		return 1
	}
	defer os.RemoveAll(dir)
	cfg := filepath.Join(dir, "haproxy.cfg")
	all := append(demoArgs(dir), args...)
	if !slices.Contains(args, "--") && os.Getenv(conf.EnvName("haproxy-command")) == "" && !hasFlag(args, "haproxy-command") {
		all = append(all, "--", "haproxy")
	}
	s, code, done := parseRun("demo", all, stdout, stderr)
	if done {
		return code
	}
	s.HAProxy = append(s.HAProxy, "-f", cfg)
	if code, err := findHAProxy(s.HAProxy[0]); err != nil {
		fmt.Fprintf(stderr, "hapsuper demo: %v\n", err)
		return code
	}
	web, probes, err := demoPorts(demoWebPort, demoProbesPort)
	if err != nil {
		fmt.Fprintf(stderr, "hapsuper demo: %v (free a port on 127.0.0.1)\n", err)
		return 1
	}
	if err := os.WriteFile(cfg, demoConfigFor(web, probes), 0o644); err != nil {
		fmt.Fprintf(stderr, "hapsuper demo: write %s: %v (set TMPDIR to a writable directory)\n", cfg, err)
		return 1
	}
	addr := fmt.Sprintf("http://127.0.0.1:%d", web)
	note := ""
	if web != demoWebPort {
		note = fmt.Sprintf("; %d or %d was taken", demoWebPort, demoProbesPort)
	}
	fmt.Fprintf(stdout, `hapsuper demo: HAProxy (%s) on %s (probes on :%d, not counted%s)
  try:    curl -s %s/
  status: %s status --watch --status-socket %s
  stop:   Ctrl-C or kill -TERM %d starts the drain; it ends once no request came for %s after the stop
          (a second Ctrl-C changes nothing; Ctrl-\ stops HAProxy at once)
`, s.HAProxy[0], addr, probes, note, addr, selfCommand(), s.StatusSocket, os.Getpid(), s.QuietPeriod)
	return supervise(s, stderr)
}

// hasFlag says whether args set the flag name before a "--".
func hasFlag(args []string, name string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		a = strings.TrimLeft(a, "-")
		if a == name || strings.HasPrefix(a, name+"=") {
			return true
		}
	}
	return false
}

// findHAProxy looks for HAProxy's binary as the supervisor will, and says
// how to get one or name another when it is missing: 127 when not found,
// 126 when not executable, as a shell and run exit.
func findHAProxy(bin string) (int, error) {
	_, err := exec.LookPath(bin)
	switch {
	case err == nil:
		return 0, nil
	case errors.Is(err, fs.ErrPermission):
		return supervisor.ExitNotExecutable, fmt.Errorf("HAProxy's binary %s is not executable: make it so (chmod +x), or name another: hapsuper demo -- /path/to/haproxy", bin)
	}
	return supervisor.ExitNotFound, fmt.Errorf("HAProxy's binary %s was not found: install HAProxy 2.6 or newer (Debian: apt-get install haproxy), or name it: hapsuper demo -- /path/to/haproxy (or --haproxy-command /path/to/haproxy)", bin)
}
