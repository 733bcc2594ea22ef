package integration

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestHaproxytech_WrapperAuxFileAndGopherd runs HAProxy as HAProxy
// Technologies' controller images do (docs/haproxytech.md): through a
// wrapper that sets LD_PRELOAD and execs haproxy, with a second -f, the aux
// file, that does not exist until hapsuper creates it
// (--create-if-missing). hapsuper's -vv probe, HAProxy itself and the
// reload's haproxy -c all run through the wrapper. hapsuper installed as
// gopherd answers the controllers' fallback `gopherd signal haproxy
// SIGUSR2` with a reload that lands, and `gopherd haproxy restart` with a
// refusal (exit 1) once the aux file is broken, while HAProxy keeps
// serving: a client sees no failure throughout.
func TestHaproxytech_WrapperAuxFileAndGopherd(t *testing.T) {
	eachHAProxy(t, func(t *testing.T, h haproxyVersion) {
		cfg := newConfig(t)
		dir := t.TempDir()
		calls := filepath.Join(dir, "wrapper.calls")
		wrapper := filepath.Join(dir, "haproxy_wrapper")
		script := "#!/bin/sh\necho \"$*\" >> " + calls + "\nexec " + h.command(t, dir) + ` "$@"` + "\n"
		if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
		aux := filepath.Join(dir, "haproxy-aux.cfg")
		s := startCommand(t, dir, procOptions{}, supervisorArgs(dir, append(fast.flags(), "--create-if-missing", aux),
			wrapper, "-f", cfg.write(t, dir), "-f", aux))
		s.waitReady(cfg.webAddr())
		if fi, err := os.Stat(aux); err != nil || fi.Size() != 0 {
			t.Fatalf("aux file %s: %v, %v; want it created empty", aux, fi, err)
		}
		if _, ok := s.Find("created empty file", nil); !ok {
			t.Error(`no "created empty file" log`)
		}
		cont := startContinuous(t, cfg.webAddr(), 20*time.Millisecond, 30*time.Second)

		gopherd := filepath.Join(dir, "gopherd")
		if err := os.Symlink(hapsuperBin(t), gopherd); err != nil {
			t.Fatal(err)
		}
		runGopherd := func(args ...string) (int, string) {
			cmd := exec.Command(gopherd, args...)
			cmd.Env = append(os.Environ(), "HAPSUPER_STATUS_SOCKET="+s.status)
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			err := cmd.Run()
			if err != nil && cmd.ProcessState == nil {
				t.Fatalf("run gopherd: %v", err)
			}
			return cmd.ProcessState.ExitCode(), out.String()
		}

		before := s.statusJSON().currentWorkers()
		if code, out := runGopherd("signal", "haproxy", "SIGUSR2"); code != 0 {
			t.Fatalf("gopherd signal haproxy SIGUSR2: exit %d: %s", code, out)
		} else {
			t.Logf("gopherd signal haproxy SIGUSR2: %s", strings.TrimSpace(out))
		}
		if after := s.statusJSON().currentWorkers(); len(after) == 0 || slices.Contains(before, after[0]) {
			t.Errorf("current workers %v after the reload, %v before: want a new one", after, before)
		}

		if err := os.WriteFile(aux, []byte("global\n  no-such-keyword on\n"), 0o664); err != nil {
			t.Fatal(err)
		}
		served := s.statusJSON().currentWorkers()
		code, out := runGopherd("haproxy", "restart")
		if code != 1 || !strings.Contains(out, "reload refused") {
			t.Errorf("gopherd haproxy restart with a broken aux file: exit %d: %s; want 1 and reload refused", code, out)
		}
		time.Sleep(300 * time.Millisecond)
		if now := s.statusJSON().currentWorkers(); !slices.Equal(now, served) {
			t.Errorf("current workers %v after the refused reload, want %v still", now, served)
		}
		if code, out := runGopherd("controller", "restart"); code != 2 || !strings.Contains(out, "gopherd signal haproxy SIGUSR2") {
			t.Errorf("gopherd controller restart: exit %d: %s; want 2 naming the supported forms", code, out)
		}
		cont.stop()
		checkNoFailures(t, cont.rec)

		b, err := os.ReadFile(calls)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		has := func(arg string) bool {
			return slices.ContainsFunc(lines, func(l string) bool { return slices.Contains(strings.Fields(l), arg) })
		}
		for _, arg := range []string{"-vv", "-c"} {
			if !has(arg) {
				t.Errorf("no wrapper call with %s: %q", arg, lines)
			}
		}
		master := slices.ContainsFunc(lines, func(l string) bool {
			f := strings.Fields(l)
			return slices.Contains(f, aux) && !slices.Contains(f, "-c") && !slices.Contains(f, "-vv")
		})
		if !master {
			t.Errorf("HAProxy itself was not started through the wrapper with the aux file: %q", lines)
		}
		s.stopClean()
	})
}
