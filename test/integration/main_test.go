// Package integration is the black-box suite of hapsuper: it builds the real
// binary, runs it as the supervisor of a real HAProxy in front of an
// in-test origin server (every test once per HAProxy version: the host's 2.6
// and Debian's 3.0, 3.2 and 3.4 from roots, see versions_test.go), drives
// clients through it and signals it, and
// asserts what the clients saw (ok, refused, reset, 5xx, timeout) and what
// the process did (exit code, time to exit, log lines, zombies, leftovers).
//
// It must not reach anything but 127.0.0.1 and the processes it started, and
// every wait in it is bounded. It needs root (PID namespaces, signalling
// HAProxy's workers); without root every test skips and says so.
//
// Run: cd test && go test ./integration/ -count=1 -v -timeout 40m
// (3.0, 3.2 and 3.4 need `bash hack/haproxy-root.sh <version>` first;
// CI=true makes a missing one a failure.)
package integration

import (
	"fmt"
	"os"
	"testing"

	"github.com/hapsuper/hapsuper/test/harness"
)

var (
	// binPath is the hapsuper binary built for this run.
	binPath string
	// buildErr says why the binary could not be built.
	buildErr error
	// skipReason is set when the machine cannot run the suite.
	skipReason string
)

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	switch {
	case os.Geteuid() != 0:
		skipReason = "the integration suite needs root (PID namespaces, signals to HAProxy's processes); run it as root as CI does"
	default:
		if _, err := os.Stat(haproxyBin); err != nil {
			skipReason = fmt.Sprintf("HAProxy not installed at %s (apt-get install haproxy): %v", haproxyBin, err)
		} else if err := discoverVersions(); err != nil {
			skipReason = fmt.Sprintf("the host's HAProxy does not run: %v", err)
		}
	}
	for _, h := range versions {
		fmt.Fprintf(os.Stderr, "integration: haproxy-%s: %s\n", h.name, h.line)
	}
	for _, m := range missingVersions {
		fmt.Fprintf(os.Stderr, "integration: %s\n", m.why)
	}
	if skipReason == "" {
		binPath, buildErr = harness.Binary()
		defer harness.RemoveBinary()
	}
	return m.Run()
}

// requireRoot skips the test when the machine cannot run the suite.
func requireRoot(t *testing.T) {
	t.Helper()
	if skipReason != "" {
		t.Skip(skipReason)
	}
}

// hapsuperBin returns the built binary, or fails the test when it could not
// be built.
func hapsuperBin(t *testing.T) string {
	t.Helper()
	requireRoot(t)
	if buildErr != nil {
		t.Fatalf("no hapsuper binary: %v", buildErr)
	}
	return binPath
}
