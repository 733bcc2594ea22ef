package haproxy

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"

	"github.com/hapsuper/hapsuper/conf"
)

// overrideText is the override file. HAProxy reads it after the user's files,
// so its global values win over theirs. Only two values reach it, the
// budget as a number of milliseconds and --lb-check-bind as conf.LBCheckAddr
// rewrote it: everything else is this file's own text.
func overrideText(s conf.Settings) (string, error) {
	ms := s.Budget().Milliseconds()
	if ms < 1 {
		return "", fmt.Errorf("the stop budget %v (--grace-period − --margin) is under 1ms: raise --grace-period", s.Budget())
	}
	text := fmt.Sprintf(overrideMark+`: bounds every soft stop (drain, reload leftovers) within the grace budget
global
    hard-stop-after %dms
`, ms)
	if s.LBCheckBind != "" {
		bind, err := conf.LBCheckAddr(s.LBCheckBind)
		if err != nil {
			return "", fmt.Errorf("--lb-check-bind %s is not an address to bind: %w", conf.QuoteIfUnprintable(s.LBCheckBind), err)
		}
		text += fmt.Sprintf(lbCheckText, LBCheck, bind, LBCheckBackend, LBCheckBackend)
	}
	return text, nil
}

// LBCheck names the health check frontend hapsuper adds for load
// balancers that check the pod (--lb-check-bind) and its stick table;
// LBCheckBackend the backend whose one server, LBCheckServer as `set
// server` names it, hapsuper puts in maintenance at the stop: the frontend
// answers 503 once that backend has no usable server. (HAProxy 3.4 refuses
// a backend named as a frontend.)
const (
	LBCheck        = "hapsuper-lb-check"
	LBCheckBackend = "hapsuper-lb-serving"
	LBCheckServer  = LBCheckBackend + "/serving"
)

// lbCheckText is the health check, after a defaults section of its own so
// that none of the user's applies. The table counts each checking address's
// requests (the failed checks once the frontend answers 503) and their rate
// over two minutes (the addresses still checking).
const lbCheckText = `# the health check of --lb-check-bind: 200 while serving, 503 from the stop on
defaults
    mode http
    timeout client 5s
    timeout http-request 5s
    timeout connect 1s
    timeout server 1s
frontend %s
    bind %s
    stick-table type ipv6 size 1k expire 10m store http_req_cnt,http_req_rate(120s)
    http-request track-sc0 src
    http-request return status 503 content-type text/plain string "draining" if { nbsrv(%s) eq 0 }
    http-request return status 200 content-type text/plain string "serving"
backend %s
    server serving 127.0.0.1:9
`

// overrideMark begins every override file: a file at the path that does
// not begin with it is someone else's, and is not overwritten.
const overrideMark = "# written by hapsuper"

// WriteOverride writes the override file, a global section with
// hard-stop-after set to the stop budget, atomically (a temporary file renamed
// into place). It creates the file's directory with mode 0700 when missing;
// the file is 0644 so HAProxy can read it whatever user it runs as.
func WriteOverride(s conf.Settings) error {
	text, err := overrideText(s)
	if err != nil {
		return err
	}
	dir := filepath.Dir(s.OverrideFile)
	if err := checkOverridePath(s.OverrideFile); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create directory %s for the override file: %w: make it writable or set --override-file", dir, err)
	}
	tmp, err := os.CreateTemp(dir, ".override-*.tmp")
	if err != nil {
		return fmt.Errorf("write override file %s: %w: make %s writable or set --override-file", s.OverrideFile, err, dir)
	}
	defer os.Remove(tmp.Name()) // after a successful rename this fails harmlessly
	_, err = tmp.WriteString(text)
	if err == nil {
		err = tmp.Chmod(0o644)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), s.OverrideFile)
	}
	if err != nil {
		return fmt.Errorf("write override file %s: %w", s.OverrideFile, err)
	}
	return nil
}

// checkOverridePath refuses to replace a file at path that hapsuper did not
// write (an --override-file equal to one of HAProxy's -f files would lose
// the user's configuration) or that is not a regular file.
func checkOverridePath(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return nil // nothing to keep; making the directory says what is wrong
	}
	if err != nil {
		return fmt.Errorf("check override file %s: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("override file %s exists and is not a regular file (%s): remove it or set --override-file elsewhere", path, fi.Mode().Type())
	}
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("check override file %s: %w", path, err)
	}
	defer f.Close()
	head := make([]byte, len(overrideMark))
	if n, _ := io.ReadFull(f, head); n < len(head) || string(head) != overrideMark {
		return fmt.Errorf("override file %s exists and was not written by hapsuper (it may be one of your configuration files): hapsuper will not overwrite it; set --override-file to a path of its own", path)
	}
	return nil
}
