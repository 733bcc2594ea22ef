// Command controller stands in for the ingress controller of HAProxy
// Technologies' images (haproxytech/kubernetes-ingress, HAProxy Unified
// Gateway) in hapsuper's tests: a program that runs beside HAProxy under
// hapsuper's --companion and behaves as the real one does where hapsuper
// can tell. It writes HAProxy's configuration and the aux file, and
// reloads HAProxy over the master CLI (`reload` on the master socket)
// every interval, as the controller's pkg/haproxy/process does in its s6
// and gopherd modes.
//
// Its command line is the controller's (a chart's args): every argument is
// accepted, logged and recorded, none is interpreted. What it does is set
// by the environment, which a chart's extraEnvs reach as well:
//
//	STANDIN_MASTER_SOCKET  master CLI socket (default /var/run/haproxy-master.sock)
//	STANDIN_INTERVAL       time between reloads (default 300ms)
//	STANDIN_CONFIG         HAProxy configuration to write before each reload
//	STANDIN_CONFIG_FROM    its content (a file), with a generation comment added
//	STANDIN_AUX            aux file to write before each reload (a comment)
//	STANDIN_DIR            where it records and is told what to do (below)
//
// In STANDIN_DIR it appends one line per event to "events" (starts with
// its args, reloads, the stop), each "<unix-nanoseconds> <pid> <event>
// [detail]", writes its pid to "pid", and reads "exit": a file holding
// an exit code, which it removes and exits with at its next tick (the
// tests' "exits 0 once", "exits 2"). SIGTERM is logged on arrival and
// ends it with code 0 once a reload in flight returns, as the controller's
// graceful stop does; SIGKILL is the tests' "killed once".
package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	os.Exit(run())
}

type standin struct {
	socket     string
	config     string
	configFrom string
	aux        string
	dir        string
	generation int
}

func run() int {
	s := standin{
		socket:     envOr("STANDIN_MASTER_SOCKET", "/var/run/haproxy-master.sock"),
		config:     os.Getenv("STANDIN_CONFIG"),
		configFrom: os.Getenv("STANDIN_CONFIG_FROM"),
		aux:        os.Getenv("STANDIN_AUX"),
		dir:        os.Getenv("STANDIN_DIR"),
	}
	interval, err := time.ParseDuration(envOr("STANDIN_INTERVAL", "300ms"))
	if err != nil || interval <= 0 {
		fmt.Fprintf(os.Stderr, "standin: STANDIN_INTERVAL %q: want a positive duration such as 300ms\n", os.Getenv("STANDIN_INTERVAL"))
		return 2
	}
	if (s.config == "") != (s.configFrom == "") {
		fmt.Fprintln(os.Stderr, "standin: STANDIN_CONFIG and STANDIN_CONFIG_FROM go together: set both or neither")
		return 2
	}
	if s.dir != "" {
		if err := os.WriteFile(filepath.Join(s.dir, "pid"), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
			fmt.Fprintf(os.Stderr, "standin: %v\n", err)
			return 2
		}
	}
	s.event("start", strings.Join(os.Args[1:], " "))
	fmt.Printf("standin controller started, pid %d, args %q\n", os.Getpid(), os.Args[1:])

	// The stop is recorded when the signal arrives, not when the loop
	// next looks: a reload in flight (a loaded master answers it only once
	// the new worker is up, seconds on a busy machine) delays the exit,
	// and hapsuper's kill delay may end the process before it.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	stop := make(chan struct{})
	go func() {
		sig := <-sigs
		s.event("stop", sig.String())
		fmt.Printf("standin controller stopping on %s\n", sig)
		close(stop)
	}()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		if code, ok := s.told(); ok {
			s.event("exit", strconv.Itoa(code))
			fmt.Fprintf(os.Stderr, "standin controller exiting with code %d as told\n", code)
			return code
		}
		s.reload()
		select {
		case <-stop:
			return 0
		case <-tick.C:
		}
	}
}

// reload writes the files and asks the master for a reload.
func (s *standin) reload() {
	s.generation++
	if err := s.write(); err != nil {
		s.event("write-failed", err.Error())
		fmt.Fprintf(os.Stderr, "standin: write configuration: %v\n", err)
		return
	}
	s.event("reload", strconv.Itoa(s.generation))
	out, err := masterCommand(s.socket, "reload")
	if err != nil {
		s.event("reload-failed", err.Error())
		fmt.Fprintf(os.Stderr, "standin: reload %d over %s: %v\n", s.generation, s.socket, err)
		return
	}
	if out = strings.TrimSpace(out); out != "" && !strings.Contains(out, "Success=1") {
		s.event("reload-refused", strings.ReplaceAll(out, "\n", " | "))
	}
}

func (s *standin) write() error {
	if s.config != "" {
		b, err := os.ReadFile(s.configFrom)
		if err != nil {
			return err
		}
		b = append(b, fmt.Sprintf("\n# written by the stand-in controller, generation %d\n", s.generation)...)
		if err := writeAtomic(s.config, b); err != nil {
			return err
		}
	}
	if s.aux != "" {
		return writeAtomic(s.aux, fmt.Appendf(nil, "# aux file of the stand-in controller, generation %d\n", s.generation))
	}
	return nil
}

func writeAtomic(path string, b []byte) error {
	tmp := path + ".standin"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// told returns the exit code written to STANDIN_DIR/exit, once.
func (s *standin) told() (int, bool) {
	if s.dir == "" {
		return 0, false
	}
	p := filepath.Join(s.dir, "exit")
	b, err := os.ReadFile(p)
	if err != nil {
		return 0, false
	}
	code, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, false // half written: read again at the next tick
	}
	os.Remove(p)
	return code, true
}

func (s *standin) event(what, detail string) {
	if s.dir == "" {
		return
	}
	f, err := os.OpenFile(filepath.Join(s.dir, "events"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "%d %d %s %s\n", time.Now().UnixNano(), os.Getpid(), what, detail)
}

// masterCommand sends one command to HAProxy's master CLI and returns its
// answer (HAProxy 2.7+ answers a reload with its outcome; 2.6 closes).
func masterCommand(socket, cmd string) (string, error) {
	c, err := net.DialTimeout("unix", socket, 2*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, cmd+"\n"); err != nil {
		return "", err
	}
	var b strings.Builder
	r := bufio.NewReader(c)
	for {
		line, err := r.ReadString('\n')
		b.WriteString(line)
		if err != nil {
			if err == io.EOF {
				return b.String(), nil
			}
			return b.String(), err
		}
	}
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
