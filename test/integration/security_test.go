package integration

// Security checks at the HAProxy level: who may read hapsuper's status, what
// HAProxy's workers may read, and what never leaves hapsuper (secrets in
// logs, status or metrics; see security_secrets_test.go).

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// nobody is the unprivileged user the tests run clients as.
var nobody = &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}

// sharedDir makes a directory under /tmp that other users may traverse
// (0711) but not list, removed when the test ends.
func sharedDir(t *testing.T, prefix string) string {
	t.Helper()
	dir, err := os.MkdirTemp("/tmp", prefix)
	if err != nil {
		t.Fatalf("make a directory under /tmp: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o711); err != nil {
		t.Fatalf("chmod %s: %v", dir, err)
	}
	return dir
}

// randomSecret returns 32 random hex digits, which appear nowhere by chance.
func randomSecret(t *testing.T) string {
	t.Helper()
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatalf("random secret: %v", err)
	}
	return hex.EncodeToString(b)
}

// TestSecurity_StatusSocketRefusesOtherUsers: the status socket is a 0600
// socket of hapsuper's uid, so another user's `hapsuper status` cannot
// connect; and when the mode is opened up (as a misconfigured volume might),
// hapsuper still refuses the peer by its SO_PEERCRED uid, with an error
// reply that carries nothing of the status.
func TestSecurity_StatusSocketRefusesOtherUsers(t *testing.T) {
	eachHAProxy(t, func(t *testing.T, h haproxyVersion) {
		dir := sharedDir(t, "hapsuper-security-status-")
		cli := filepath.Join(dir, "hapsuper-cli") // a copy nobody may run
		bin, err := os.ReadFile(hapsuperBin(t))
		if err != nil || os.WriteFile(cli, bin, 0o755) != nil {
			t.Fatalf("copy the hapsuper binary for nobody: %v", err)
		}
		cfg := newConfig(t)
		s := startSupervisor(t, h, dir, cfg.write(t, dir), fast.flags()...)
		s.waitReady(cfg.webAddr())
		master := s.waitWorkers().MasterPid

		fi, err := os.Lstat(s.status)
		if err != nil {
			t.Fatalf("stat the status socket: %v", err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		t.Logf("status socket %s: mode %s, uid %d", s.status, fi.Mode(), st.Uid)
		if fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
			t.Errorf("status socket mode %s, want a socket with 0600", fi.Mode())
		}
		if int(st.Uid) != os.Geteuid() {
			t.Errorf("status socket owned by uid %d, want hapsuper's %d", st.Uid, os.Geteuid())
		}

		// Mode 0600: nobody cannot even connect. Mode 0666: nobody connects,
		// and SO_PEERCRED refuses it.
		for _, c := range []struct {
			mode os.FileMode
			want string
		}{{0o600, "permission denied"}, {0o666, "peer uid 65534"}} {
			if err := os.Chmod(s.status, c.mode); err != nil {
				t.Fatalf("chmod the status socket: %v", err)
			}
			out, errs, code := runAs(t, nobody, "", cli, "status", "--socket", s.status, "--json")
			t.Logf("as nobody, mode %o: exit %d, stdout %q, stderr %q", c.mode, code, out, errs)
			if code == 0 || out != "" || !strings.Contains(errs, c.want) {
				t.Errorf("nobody's hapsuper status, mode %o: exit %d, stdout %q, stderr %q; want exit ≠ 0, nothing printed, %s", c.mode, code, out, errs, c.want)
			}
		}
		raw, errs, code := runAs(t, nobody, "status\n", "socat", "-t", "3", "-", "UNIX-CONNECT:"+s.status)
		t.Logf("as nobody, raw reply: exit %d, %q %s", code, raw, errs)
		var reply statusDoc
		var refusal struct {
			Error string `json:"error"`
		}
		if json.Unmarshal([]byte(raw), &reply) != nil || json.Unmarshal([]byte(raw), &refusal) != nil {
			t.Errorf("the raw reply to nobody is not one JSON document: %q", raw)
		}
		if !strings.HasPrefix(refusal.Error, "peer uid 65534") {
			t.Errorf("the raw reply's error is %q, want the peer uid refusal", refusal.Error)
		}
		if reply.MasterPid != 0 || len(reply.Workers) > 0 || reply.Phase != "" || strings.Contains(raw, strconv.Itoa(master)) {
			t.Errorf("the refusal carries status (master %d): %q", master, raw)
		}
		if _, ok := s.Wait("status request refused", nil, 2*time.Second, nil); !ok {
			t.Error(`no "status request refused" in hapsuper's log`)
		}

		// Root (hapsuper's uid) is still served.
		if err := os.Chmod(s.status, 0o600); err != nil {
			t.Fatalf("chmod the status socket back: %v", err)
		}
		if d := s.statusJSON(); d.MasterPid != master {
			t.Errorf("root's status: masterPid %d, want %d", d.MasterPid, master)
		}
		s.stopClean()
	})
}

// TestSecurity_WorkersCannotReadToken: the token-isolation arrangement
// (deploy/components/token-isolation): hapsuper and HAProxy's master run as
// root, the config's `user haproxy`/`group haproxy` drop the workers to
// haproxy. A root-owned 0400 token is then readable by root and not by the
// worker's credentials, and the worker keeps no capability that would
// bypass the file mode. A 0444 token shows that only the mode denies it.
func TestSecurity_WorkersCannotReadToken(t *testing.T) {
	eachHAProxy(t, func(t *testing.T, h haproxyVersion) {
		tokDir := sharedDir(t, "hapsuper-security-token-")
		token, secret := filepath.Join(tokDir, "token"), randomSecret(t)
		if err := os.WriteFile(token, []byte(secret), 0o400); err != nil {
			t.Fatalf("write the token: %v", err)
		}
		uid, gid := passwdIDs(t, filepath.Join(h.root, "/etc/passwd"), "haproxy")

		dir := t.TempDir()
		cfg := newConfig(t)
		text := strings.Replace(cfg.render(), "global\n", "global\n    user haproxy\n    group haproxy\n", 1)
		path := filepath.Join(dir, "haproxy.cfg")
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatalf("write haproxy config: %v", err)
		}
		s := startSupervisor(t, h, dir, path, fast.flags()...)
		s.waitReady(cfg.webAddr())
		d := s.waitWorkers()
		worker := d.currentWorkers()[0]
		m, w := procStatus(t, d.MasterPid), procStatus(t, worker)
		t.Logf("master %d: Uid %s Gid %s CapEff %s; worker %d: Uid %s Gid %s Groups %q CapEff %s; haproxy is %d:%d in %s",
			d.MasterPid, m["Uid"], m["Gid"], m["CapEff"], worker, w["Uid"], w["Gid"], w["Groups"], w["CapEff"], uid, gid, h.line)

		if !idsAre(w["Uid"], uid) {
			t.Errorf("worker %d Uid %q: want haproxy's %d as real, effective, saved and fs uid", worker, w["Uid"], uid)
		}
		if !idsAre(w["Gid"], gid) {
			t.Errorf("worker %d Gid %q: want haproxy's %d", worker, w["Gid"], gid)
		}
		if f := strings.Fields(m["Uid"]); len(f) == 0 || f[0] != "0" {
			t.Errorf("master %d Uid %q: the arrangement has it run as root", d.MasterPid, m["Uid"])
		}
		if c := w["CapEff"]; strings.Trim(c, "0") != "" {
			t.Errorf("worker %d keeps capabilities %s: it could bypass the token's file mode", worker, c)
		}

		cred := &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: groupsOf(w["Groups"])}
		out, errs, code := runAs(t, cred, "", "cat", token)
		t.Logf("cat token as the worker's credentials: exit %d, stderr %q", code, strings.TrimSpace(errs))
		if code == 0 || strings.Contains(out, secret) || !strings.Contains(errs, "Permission denied") {
			t.Errorf("the worker's credentials read the 0400 token: exit %d, stdout %q, stderr %q", code, out, errs)
		}
		if out, _, code := runAs(t, nil, "", "cat", token); code != 0 || out != secret {
			t.Errorf("root cannot read the token: exit %d, %q", code, out)
		}
		if err := os.Chmod(token, 0o444); err != nil {
			t.Fatal(err)
		}
		if out, errs, code := runAs(t, cred, "", "cat", token); code != 0 || out != secret {
			t.Errorf("the worker's credentials cannot read even a 0444 token (exit %d, %q): the test does not test the mode", code, errs)
		}

		s.stopClean()
	})
}

// passwdIDs returns the uid and gid of user in the passwd file at path.
func passwdIDs(t *testing.T, path, user string) (int, int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Split(line, ":")
		if len(f) >= 4 && f[0] == user {
			uid, err1 := strconv.Atoi(f[2])
			gid, err2 := strconv.Atoi(f[3])
			if err1 == nil && err2 == nil {
				return uid, gid
			}
		}
	}
	t.Fatalf("no user %s in %s (HAProxy's package creates it)", user, path)
	return 0, 0
}

// procStatus reads /proc/<pid>/status into its fields.
func procStatus(t *testing.T, pid int) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		t.Fatalf("read the status of process %d: %v", pid, err)
	}
	m := map[string]string{}
	for _, line := range bytes.Split(b, []byte("\n")) {
		if k, v, ok := strings.Cut(string(line), ":"); ok {
			m[k] = strings.TrimSpace(v)
		}
	}
	return m
}

// idsAre reports whether a Uid or Gid field of /proc/<pid>/status (real,
// effective, saved, filesystem) is id four times.
func idsAre(field string, id int) bool {
	f := strings.Fields(field)
	for _, v := range f {
		if v != strconv.Itoa(id) {
			return false
		}
	}
	return len(f) == 4
}

// groupsOf parses the Groups field of /proc/<pid>/status.
func groupsOf(field string) []uint32 {
	gs := []uint32{}
	for _, f := range strings.Fields(field) {
		if g, err := strconv.ParseUint(f, 10, 32); err == nil {
			gs = append(gs, uint32(g))
		}
	}
	return gs
}
