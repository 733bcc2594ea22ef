package integration

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestShims_CompanionAndConcurrentReloads: hapsuper installed as gopherd
// and as s6-svc, the commands HAProxy Technologies' controllers run when
// their master socket is not usable.
//
// The companion finds the running hapsuper with no variable of its own:
// its --status-socket is given as a flag, and hapsuper puts it in the
// companion's environment (its gopherd asked the default path and failed
// before).
//
// Two reloads asked at once each report their own reload: gopherd's is
// being checked (haproxy -c, slowed to 3 s by the wrapper) when s6-svc
// asks, so s6-svc's needs a check and a worker of its own; each call
// reports the new worker of the reload it asked for (s6-svc reported
// gopherd's before), and s6-svc's worker is the one serving at the end.
func TestShims_CompanionAndConcurrentReloads(t *testing.T) {
	eachHAProxy(t, func(t *testing.T, h haproxyVersion) {
		cfg := newConfig(t)
		dir := t.TempDir()
		bin := hapsuperBin(t)
		gopherd, s6svc := filepath.Join(dir, "gopherd"), filepath.Join(dir, "s6-svc")
		for _, link := range []string{gopherd, s6svc} {
			if err := os.Symlink(bin, link); err != nil {
				t.Fatal(err)
			}
		}
		companion := filepath.Join(dir, "companion.sh")
		result := filepath.Join(dir, "companion.result")
		script := "#!/bin/sh\n" + gopherd + " signal haproxy SIGUSR2 >" + result + ".tmp 2>&1\necho \"exit $?\" >>" + result + ".tmp\nmv " + result + ".tmp " + result + "\nexec sleep 600\n"
		if err := os.WriteFile(companion, []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
		wrapper := filepath.Join(dir, "haproxy-wrapper.sh")
		slow := "#!/bin/sh\ncase \" $* \" in *\" -c \"*) sleep 3;; esac\nexec " + h.command(t, dir) + ` "$@"` + "\n"
		if err := os.WriteFile(wrapper, []byte(slow), 0o755); err != nil {
			t.Fatal(err)
		}
		env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "HAPSUPER_") })
		s := startCommand(t, dir, procOptions{}, append(fast.flags(),
			"--companion", companion,
			"--haproxy-command", wrapper+" -f "+cfg.write(t, dir),
			"--master-socket", filepath.Join(dir, "master.sock"),
			"--status-socket", filepath.Join(dir, "status.sock"),
			"--override-file", filepath.Join(dir, "override.cfg"),
			"--log-format", "json"))
		s.waitReady(cfg.webAddr())

		// The companion's gopherd.
		var out []byte
		for end := time.Now().Add(60 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
			if b, err := os.ReadFile(result); err == nil {
				out = b
				break
			}
		}
		t.Logf("the companion's gopherd: %s", bytes.TrimSpace(out))
		if !bytes.Contains(out, []byte("exit 0")) || !bytes.Contains(out, []byte("serves")) {
			t.Fatalf("the companion's gopherd did not reload through hapsuper: %q", out)
		}

		// Two at once, from outside, with the socket in the environment.
		type call struct {
			code   int
			out    string
			worker int
		}
		run := func(argv []string, done chan<- call) {
			cmd := exec.Command(argv[0], argv[1:]...)
			cmd.Env = append(slices.Clone(env), "HAPSUPER_STATUS_SOCKET="+s.status)
			var b bytes.Buffer
			cmd.Stdout, cmd.Stderr = &b, &b
			err := cmd.Run()
			c := call{code: -1, out: b.String()}
			if err == nil || cmd.ProcessState != nil {
				c.code = cmd.ProcessState.ExitCode()
			}
			if m := regexp.MustCompile(`worker (\d+) serves`).FindStringSubmatch(c.out); m != nil {
				c.worker, _ = strconv.Atoi(m[1])
			}
			done <- c
		}
		first, second := make(chan call, 1), make(chan call, 1)
		go run([]string{gopherd, "signal", "haproxy", "SIGUSR2"}, first)
		if _, ok := s.waitStatus(30*time.Second, func(d statusDoc) bool {
			return d.Reloads.Last != nil && d.Reloads.Last.Result == "checking" && d.Reloads.Last.Origin == "gopherd" && d.Reloads.OK == 1
		}); !ok {
			t.Fatal("gopherd's reload was never seen being checked")
		}
		go run([]string{s6svc, "-2", "/run/service/haproxy"}, second)
		var got [2]call
		for i, ch := range []chan call{first, second} {
			select {
			case got[i] = <-ch:
			case <-time.After(3 * time.Minute):
				t.Fatalf("call %d did not end within 3 minutes", i)
			}
		}
		t.Logf("gopherd: exit %d: %s", got[0].code, strings.TrimSpace(got[0].out))
		t.Logf("s6-svc: exit %d: %s", got[1].code, strings.TrimSpace(got[1].out))
		if got[0].code != 0 || got[1].code != 0 || got[0].worker == 0 || got[1].worker == 0 {
			t.Fatalf("both calls should end 0 naming a worker")
		}
		if got[0].worker == got[1].worker {
			t.Errorf("both calls report worker %d: s6-svc asked after gopherd's check had read the files, so its reload is another", got[0].worker)
		}
		if cur := s.statusJSON().currentWorkers(); len(cur) == 0 || cur[0] != got[1].worker {
			t.Errorf("current workers %v, want s6-svc's worker %d serving", cur, got[1].worker)
		}
		if d := s.statusJSON(); d.Reloads.OK != 3 {
			t.Errorf("%d reloads ok, want 3 (the companion's, gopherd's, s6-svc's)", d.Reloads.OK)
		}
		s.stopClean()
	})
}
