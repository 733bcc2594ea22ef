package main

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The demo takes its ports (8080 and 8081) when they are free, and two
// other free ports when one is taken, instead of an HAProxy that cannot
// bind. The test takes ports of its own, not 8080, which a demo may use.
func TestDemoPortsAvoidATakenPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	taken := ln.Addr().(*net.TCPAddr).Port
	ln2, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	free := ln2.Addr().(*net.TCPAddr).Port
	ln2.Close()
	if web, probes, err := demoPorts(free, free+1); err != nil || web != free || probes != free+1 {
		// free+1 may be someone's: then two others are right too.
		t.Logf("demoPorts(%d, %d) with both free = %d, %d, %v", free, free+1, web, probes, err)
	}
	web, probes, err := demoPorts(taken, taken+1)
	ln.Close()
	if err != nil {
		t.Fatal(err)
	}
	if web == taken || probes == taken || web == probes || web == 0 || probes == 0 {
		t.Fatalf("demoPorts with %d taken = %d, %d", taken, web, probes)
	}
	for _, p := range []int{web, probes} {
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			t.Errorf("port %d is not free: %v", p, err)
			continue
		}
		l.Close()
	}
	cfg := string(demoConfigFor(web, probes))
	if !strings.Contains(cfg, "bind 127.0.0.1:"+strconv.Itoa(web)+"\n") || !strings.Contains(cfg, "bind 127.0.0.1:"+strconv.Itoa(probes)+"\n") || strings.Contains(cfg, "_PORT") {
		t.Errorf("the demo's configuration does not bind the ports it picked:\n%s", cfg)
	}
	if strings.Contains(cfg, "\n    log ") || strings.Contains(cfg, "\nglobal") {
		t.Errorf("the demo's configuration logs to stderr, which repeats HAProxy's messages:\n%s", cfg)
	}
}

// Without HAProxy where the demo looks, it says how to install one or name
// it, before its banner (nothing on stdout), and exits 127 as run does; the
// words after -- and --haproxy-command name it instead of the PATH.
func TestDemoNamesItsHAProxyBeforeTheBanner(t *testing.T) {
	t.Setenv("PATH", t.TempDir()) // no haproxy on it
	missing := filepath.Join(t.TempDir(), "haproxy")
	noexec := filepath.Join(t.TempDir(), "haproxy")
	if err := os.WriteFile(noexec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		args []string
		code int
		want []string
	}{
		{[]string{"demo"}, 127, []string{"haproxy was not found", "apt-get install haproxy", "hapsuper demo -- /path/to/haproxy"}},
		{[]string{"demo", "--", missing}, 127, []string{missing + " was not found", "apt-get install haproxy"}},
		{[]string{"demo", "--haproxy-command", missing}, 127, []string{missing + " was not found"}},
		{[]string{"demo", "--haproxy-command=" + missing}, 127, []string{missing + " was not found"}},
		{[]string{"demo", "--", noexec, "-V"}, 126, []string{noexec + " is not executable", "chmod +x"}},
	} {
		code, out, errs := runArgs(tt.args...)
		if code != tt.code || out != "" {
			t.Errorf("hapsuper %s: exit %d, stdout %q; want %d and no banner", strings.Join(tt.args, " "), code, out, tt.code)
		}
		for _, w := range tt.want {
			if !strings.Contains(errs, w) {
				t.Errorf("hapsuper %s: stderr %q lacks %q", strings.Join(tt.args, " "), errs, w)
			}
		}
	}
}
