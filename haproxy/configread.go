package haproxy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
)

// MaxConfigSize is the most configuration, all files together, that the
// inspection reads: what is read stays in memory while it is parsed, in
// hapsuper, the pod's PID 1. A generated configuration of 10,000 backends
// is about 2.5 MiB, and its backends are not parsed
// (docs/drain.md#which-frontends-count).
const MaxConfigSize = 16 << 20

// ErrNotInspected says that the configuration was not inspected because of
// what its files are (over MaxConfigSize, not a regular file), not because
// of what they say: HAProxy may load it all the same.
var ErrNotInspected = errors.New("configuration not inspected")

// readConfig returns what the parser reads of the files, in their order:
// each regular file's text with the snippet markers blanked and the
// backend sections left out (the inspection reads global, defaults,
// frontends and listen sections; a generated configuration is mostly
// backends). A file that is not a regular file (a FIFO, a device: reading
// one could block) or a total over MaxConfigSize is an error that wraps
// ErrNotInspected and names the file.
func readConfig(files []string) ([]byte, error) {
	var all bytes.Buffer
	left := int64(MaxConfigSize)
	for _, f := range files {
		data, err := readRegular(f, left)
		if err != nil {
			return nil, err
		}
		left -= int64(len(data))
		all.Write(withoutBackends(withoutSnippetMarkers(data)))
		all.WriteByte('\n')
	}
	return all.Bytes(), nil
}

// readRegular reads the regular file f, at most limit bytes. It is opened
// non-blocking, so that a FIFO put in its place after the check does not
// block, and checked again once open.
func readRegular(f string, limit int64) ([]byte, error) {
	info, err := os.Stat(f)
	if err != nil {
		return nil, fmt.Errorf("read HAProxy configuration %s: %w", f, err)
	}
	if !info.Mode().IsRegular() {
		return nil, notRegular(f, info)
	}
	fd, err := os.OpenFile(f, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("read HAProxy configuration %s: %w", f, err)
	}
	defer fd.Close()
	if info, err = fd.Stat(); err != nil {
		return nil, fmt.Errorf("read HAProxy configuration %s: %w", f, err)
	}
	if !info.Mode().IsRegular() {
		return nil, notRegular(f, info)
	}
	data, err := io.ReadAll(io.LimitReader(fd, limit+1))
	if err != nil {
		return nil, fmt.Errorf("read HAProxy configuration %s: %w", f, err)
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("read HAProxy configuration %s: it takes the configuration over %d MiB, the most hapsuper reads, so no frontend is known graceful and kept-alive requests count as traffic: keep what -f loads under %d MiB: %w",
			f, MaxConfigSize>>20, MaxConfigSize>>20, ErrNotInspected)
	}
	return data, nil
}

func notRegular(f string, info os.FileInfo) error {
	kind := "not a regular file"
	switch m := info.Mode(); {
	case m.IsDir():
		kind = "a directory"
	case m&os.ModeNamedPipe != 0:
		kind = "a FIFO"
	case m&os.ModeDevice != 0:
		kind = "a device"
	case m&os.ModeSocket != 0:
		kind = "a socket"
	}
	return fmt.Errorf("read HAProxy configuration %s: it is %s, and hapsuper reads regular files only (give -f a file or a directory of *.cfg files): %w", f, kind, ErrNotInspected)
}

// snippetMarker is the comment that HAProxy Technologies' controllers
// (client-native's config parser, which kubernetes-ingress writes through)
// put around a config snippet: `  ###_config-snippet_### BEGIN` and
// `  ###_config-snippet_### END` in global, frontend and backend sections.
const snippetMarker = "###_config-snippet_###"

// withoutSnippetMarkers blanks the snippet marker lines. HAProxy reads
// them as comments and applies what is between them; the config parser
// would keep the block as one raw snippet, hiding its directives (option
// idle-close-on-response in frontend-config-snippet) from the inspection.
// Only the parser's input changes, never the user's file; a blank line
// keeps the line numbers of parse errors.
func withoutSnippetMarkers(data []byte) []byte {
	if !bytes.Contains(data, []byte(snippetMarker)) {
		return data
	}
	lines := bytes.SplitAfter(data, []byte("\n"))
	for i, line := range lines {
		f := strings.Fields(string(line))
		if len(f) == 2 && f[0] == snippetMarker && (f[1] == "BEGIN" || f[1] == "END") {
			lines[i] = []byte("\n")
		}
	}
	return bytes.Join(lines, nil)
}

// sections are the keywords that open a section of HAProxy's
// configuration (3.4's; one the list lacks only ends a backend later).
var sections = map[string]bool{
	"global": true, "defaults": true, "frontend": true, "backend": true, "listen": true,
	"peers": true, "resolvers": true, "userlist": true, "mailers": true, "program": true,
	"http-errors": true, "ring": true, "cache": true, "log-forward": true, "fcgi-app": true,
	"crt-store": true, "traces": true, "acme": true,
}

// withoutBackends blanks the backend sections' lines, keeping conditional
// directives (.if, .endif…) so that their blocks stay balanced. Nothing the
// inspection reads is in a backend: a proxy's settings come from itself and
// its defaults sections.
func withoutBackends(data []byte) []byte {
	if !bytes.Contains(data, []byte("backend")) {
		return data
	}
	out := make([]byte, 0, len(data))
	skip := false
	for len(data) > 0 {
		line := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line = data[:i+1]
		}
		data = data[len(line):]
		first := firstField(line)
		if sections[first] {
			skip = first == "backend"
		}
		if skip && !strings.HasPrefix(first, ".") {
			out = append(out, '\n') // a blank line keeps the line numbers
			continue
		}
		out = append(out, line...)
	}
	return out
}

// firstField returns the line's first word.
func firstField(line []byte) string {
	line = bytes.TrimLeft(line, " \t")
	end := bytes.IndexAny(line, " \t\r\n#")
	if end < 0 {
		end = len(line)
	}
	return string(line[:end])
}
