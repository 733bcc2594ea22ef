package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/hapsuper/hapsuper/conf"
	"github.com/hapsuper/hapsuper/status"
)

// The gopherd command: hapsuper installed as `gopherd` in HAProxy
// Technologies' controller images (docs/haproxytech.md). Their controllers
// reload HAProxy over the master socket and, when it is not usable, run
// `gopherd signal haproxy SIGUSR2` (kubernetes-ingress) or `gopherd haproxy
// restart` (HAProxy Unified Gateway). Both become a checked reload of the
// running hapsuper, asked on its status socket (HAPSUPER_STATUS_SOCKET,
// which hapsuper sets in its companion's environment), whose answer is the
// outcome of that reload and of no other (status.AskReload). Exit 0 when a
// new worker serves, 1 when it was refused or failed. s6svc.go does the
// same for `s6-svc -2`.

// gopherdName is the program name that selects the gopherd command.
const gopherdName = "gopherd"

// gopherdForms are the command lines the gopherd command answers.
var gopherdForms = [][]string{
	{"signal", "haproxy", "SIGUSR2"},
	{"haproxy", "restart"},
}

// shimReloadTimeout bounds the wait for the reload's outcome: the
// server's own bound (a check queued behind another, then the new
// worker), and a little more for the answer to come back.
const shimReloadTimeout = status.ReloadWait + 10*time.Second

func gopherdCommand(args []string, stdout, stderr io.Writer) int {
	if !gopherdForm(args) {
		var forms []string
		for _, f := range gopherdForms {
			forms = append(forms, "`gopherd "+strings.Join(f, " ")+"`")
		}
		fmt.Fprintf(stderr, "gopherd: %q is not supported: this is hapsuper installed as gopherd, which answers only %s (a checked reload of HAProxy); run hapsuper for everything else\n",
			strings.Join(args, " "), strings.Join(forms, " and "))
		return 2
	}
	return shimReload(gopherdName, stdout, stderr)
}

// shimReload asks the running hapsuper for a checked reload on behalf of
// the shim name and reports its outcome: 0 when a new worker serves, 1
// otherwise.
func shimReload(name string, stdout, stderr io.Writer) int {
	socket := envOr(conf.StatusSocketEnv, conf.DefaultStatusSocket)
	r, err := status.AskReload(socket, name, shimReloadTimeout)
	switch {
	case err != nil:
		fmt.Fprintf(stderr, "%s: no reload: %v (hapsuper's status socket: %s, from %s)\n", name, err, socket, conf.StatusSocketEnv)
		return 1
	case r.Result != status.ReloadOK:
		fmt.Fprintf(stderr, "%s: reload %s: %s; HAProxy keeps serving the previous configuration\n", name, r.Result, r.Detail)
		return 1
	}
	fmt.Fprintf(stdout, "%s: haproxy reloaded by hapsuper: worker %d serves\n", name, r.Worker)
	return 0
}

func gopherdForm(args []string) bool {
	for _, f := range gopherdForms {
		if len(args) == len(f) && strings.EqualFold(strings.Join(args, " "), strings.Join(f, " ")) {
			return true
		}
	}
	return false
}
