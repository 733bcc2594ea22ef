package main

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"
)

// The s6-svc command: hapsuper installed as `s6-svc` in HAProxy
// Technologies' kubernetes-ingress image, whose controller (3.2, s6 mode)
// runs `s6-svc -2 /run/service/haproxy` when the master socket is not
// usable and takes any exit but 0 as a failed reload. s6-svc -2 sends
// SIGUSR2 to the service, -h SIGHUP; HAProxy's master reloads on either,
// so both become the checked reload gopherd asks for (shimReload), with
// its exit codes: 0 when a new worker serves, 1 when it was refused or
// failed. Every other s6-svc option (stop, restart, up, other signals)
// exits 100, s6's code for wrong usage: HAProxy's life is hapsuper's, and
// the pod's stop drains it.

// s6svcName is the program name that selects the s6-svc command.
const s6svcName = "s6-svc"

// s6svcService is the service directory's name: the controller's is
// /run/service/haproxy.
const s6svcService = "haproxy"

// s6svcUsage is s6's exit code for wrong usage.
const s6svcUsage = 100

// s6svcReloads are the options that reload HAProxy.
var s6svcReloads = map[string]bool{"-2": true, "-h": true}

func s6svcCommand(args []string, stdout, stderr io.Writer) int {
	if len(args) != 2 || !s6svcReloads[args[0]] {
		fmt.Fprintf(stderr, "s6-svc: %q is not supported: this is hapsuper installed as s6-svc, which answers only `s6-svc -2 <dir>/%s` and `s6-svc -h <dir>/%s` (a checked reload of HAProxy); HAProxy is started, stopped and drained by hapsuper, not by s6-svc\n",
			strings.Join(args, " "), s6svcService, s6svcService)
		return s6svcUsage
	}
	if dir := filepath.Clean(args[1]); filepath.Base(dir) != s6svcService {
		fmt.Fprintf(stderr, "s6-svc: %s is not a service here: hapsuper supervises HAProxy only (a service directory named %s, such as /run/service/%s)\n", args[1], s6svcService, s6svcService)
		return s6svcUsage
	}
	return shimReload(s6svcName, stdout, stderr)
}

// shimCommand returns the command of the program name argv0 when
// hapsuper is installed under a name the controllers call (gopherd,
// s6-svc), and false for hapsuper's own name.
func shimCommand(argv0 string) (func(args []string, stdout, stderr io.Writer) int, bool) {
	switch filepath.Base(argv0) {
	case gopherdName:
		return gopherdCommand, true
	case s6svcName:
		return s6svcCommand, true
	}
	return nil, false
}
