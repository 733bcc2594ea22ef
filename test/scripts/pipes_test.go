// Package scripts checks the shell that CI runs: .ci/run, hack/*.sh and the
// Makefile's recipes. These run under `set -o pipefail` (or may one day), so
// a pipeline whose reader exits before its writer has finished (`| head`,
// `| grep -q`, an awk that exits) can fail at random: the writer dies of
// SIGPIPE and the pipeline's status is 141. One such line made every second
// CI run fail before it installed anything.
package scripts

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// repoRoot is the repository's top directory, two levels above this package.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// ciScripts lists the files whose pipelines CI runs.
func ciScripts(t *testing.T) []string {
	t.Helper()
	root := repoRoot(t)
	files := []string{filepath.Join(root, ".ci", "run"), filepath.Join(root, "Makefile")}
	hack, err := filepath.Glob(filepath.Join(root, "hack", "*.sh"))
	if err != nil {
		t.Fatal(err)
	}
	if len(hack) == 0 {
		t.Fatal("no hack/*.sh found: the test is not looking where the scripts are")
	}
	return append(files, hack...)
}

// TestNoEarlyClosingPipeReaders fails on any pipeline in the CI scripts whose
// reader can stop reading before its writer is done.
func TestNoEarlyClosingPipeReaders(t *testing.T) {
	for _, file := range ciScripts(t) {
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range pipeReaders(string(src)) {
			if why := closesEarly(r.command); why != "" {
				t.Errorf("%s:%d: `| %s` %s; read the whole input instead (`sed -n 1p`, `grep ... >/dev/null`, or capture into a variable first)",
					filepath.Base(file), r.line, r.command, why)
			}
		}
	}
}

// TestEarlyCloseDetector proves the detector finds the lines that broke CI,
// so that TestNoEarlyClosingPipeReaders can fail.
func TestEarlyCloseDetector(t *testing.T) {
	for _, tc := range []struct {
		src  string
		want []string // the flagged reader commands, in order
	}{
		{"haproxy -v | head -1\n", []string{"head -1"}},
		{"haproxy -v 2>&1 | sed -n 1p\n", nil},
		{"x=$(debian_mirror | head -1)\n", []string{"head -1"}},
		{`printf '%s\n' "${t[@]}" | grep -qx "$a"`, []string{`grep -qx "$a"`}},
		{"ps | grep -m1 haproxy", []string{"grep -m1 haproxy"}},
		{"ps | grep --quiet haproxy", []string{"grep --quiet haproxy"}},
		{"ps | grep -c haproxy || true", nil},
		{"a || b | tee log", nil},
		{"sed 's/#.*//' \"$f\" | awk -v re=x '\n\t$1 == \"deb\" { print $2; exit }'\n", []string{"awk -v re=x '\n\t$1 == \"deb\" { print $2; exit }'"}},
		{"cat f | sed 1q", []string{"sed 1q"}},
		{"echo 'a | head' | cat", nil},
	} {
		var got []string
		for _, r := range pipeReaders(tc.src) {
			if closesEarly(r.command) != "" {
				got = append(got, r.command)
			}
		}
		if strings.Join(got, "\x00") != strings.Join(tc.want, "\x00") {
			t.Errorf("%q: flagged %q, want %q", tc.src, got, tc.want)
		}
	}
}

// reader is the command on the right of a pipe, and the line it starts on.
type reader struct {
	command string
	line    int
}

// pipeReaders returns the command after every unquoted `|` (not `||`) of a
// shell text, up to the next unquoted `|`, `;`, `&`, `)` or newline. Quotes
// may span lines (awk programs do); comments start at an unquoted `#` that
// begins a word.
func pipeReaders(src string) []reader {
	var out []reader
	line := 1
	var cur *strings.Builder
	start := 0
	var quote byte
	flush := func() {
		if cur != nil {
			out = append(out, reader{strings.TrimSpace(cur.String()), start})
			cur = nil
		}
	}
	for i := 0; i < len(src); i++ {
		c := src[i]
		if c == '\n' {
			line++
		}
		switch {
		case quote != 0:
			if c == '\\' && quote == '"' && i+1 < len(src) {
				if cur != nil {
					cur.WriteByte(c)
				}
				i++
				c = src[i]
			} else if c == quote {
				quote = 0
			}
		case c == '\\' && i+1 < len(src):
			if cur != nil {
				cur.WriteByte(c)
			}
			i++
			c = src[i]
			if c == '\n' {
				line++
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '#' && (i == 0 || strings.IndexByte(" \t\n;", src[i-1]) >= 0):
			for i < len(src) && src[i] != '\n' {
				i++
			}
			i--
			continue
		case c == '|' && i+1 < len(src) && src[i+1] == '|':
			flush()
			i++
			continue
		case c == '|':
			flush()
			cur = &strings.Builder{}
			start = line
			continue
		case c == ';' || c == '&' || c == ')' || c == '\n':
			flush()
			continue
		}
		if cur != nil {
			cur.WriteByte(c)
		}
	}
	flush()
	return out
}

var (
	grepEarly  = regexp.MustCompile(`^-[A-Za-z]*[qslm]|^--(quiet|silent|max-count|files-with-matches)`)
	sedQuit    = regexp.MustCompile(`(^|[;{}\s'"0-9$/])[qQ]([;}\s'"]|$)`)
	awkExit    = regexp.MustCompile(`\bexit\b`)
	readerVerb = regexp.MustCompile(`^\s*(\S+)`)
)

// closesEarly says why a pipe reader may exit before reading all its input,
// or "" when it reads to the end.
func closesEarly(command string) string {
	m := readerVerb.FindStringSubmatch(command)
	if m == nil {
		return ""
	}
	args := strings.Fields(command)[1:]
	switch filepath.Base(m[1]) {
	case "head":
		return "exits after its first lines"
	case "grep", "egrep", "fgrep":
		for _, a := range args {
			if grepEarly.MatchString(a) {
				return "stops at the first match (" + a + ")"
			}
		}
	case "sed":
		if sedQuit.MatchString(strings.Join(args, " ")) {
			return "quits before the end of its input"
		}
	case "awk", "gawk", "mawk":
		if awkExit.MatchString(command) {
			return "has an awk program that can exit before the end of its input"
		}
	}
	return ""
}

// TestRewrittenPipelinesRepeat runs each pipeline that once closed its
// reader early, as the script now writes it, 50 times under
// `set -euo pipefail`: one SIGPIPE fails the test. Each entry names the text
// it must still find in its file, so the two cannot drift apart.
func TestRewrittenPipelinesRepeat(t *testing.T) {
	root := repoRoot(t)
	roots := os.Getenv("HAPSUPER_HAPROXY_ROOTS")
	if roots == "" {
		roots = "/var/cache/hapsuper"
	}
	type pipeline struct {
		file, text string
		run        string // the pipeline as run here (the script's own text, with its context)
		needs      string // a file that must exist, else the entry is skipped (failed in CI)
	}
	pipelines := []pipeline{
		{
			file: "hack/setup.sh", text: "haproxy -v 2>&1 | sed -n 1p",
			run: "haproxy -v 2>&1 | sed -n 1p", needs: lookPath("haproxy"),
		},
		{
			file: "hack/debian-mirror.sh", text: "} | sed -n 1p",
			// The whole script, as haproxy-root.sh and image.sh call it.
			run:   `mirror=$(sh hack/debian-mirror.sh); [ -n "$mirror" ]`,
			needs: "/etc/apt",
		},
	}
	for _, v := range []string{"3.0", "3.2", "3.4"} {
		root := filepath.Join(roots, "haproxy-"+v)
		pipelines = append(pipelines, pipeline{
			file: "hack/haproxy-root.sh", text: `version() { chroot "$1" /usr/sbin/haproxy -v 2>/dev/null | sed -n 1p; }`,
			run:   `set -- ` + shellQuote(root) + `; chroot "$1" /usr/sbin/haproxy -v 2>/dev/null | sed -n 1p`,
			needs: filepath.Join(root, "usr/sbin/haproxy"),
		})
	}
	for _, tc := range pipelines {
		src, err := os.ReadFile(filepath.Join(root, tc.file))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(src), tc.text) {
			t.Errorf("%s no longer holds %q: update this table with the line as it is now", tc.file, tc.text)
			continue
		}
		if _, err := os.Stat(tc.needs); tc.needs == "" || err != nil {
			missing := tc.needs
			if missing == "" {
				missing = "haproxy on the PATH"
			}
			msg := "skipped " + tc.file + " `" + tc.text + "`: " + missing + " is missing (apt-get install haproxy; bash hack/haproxy-root.sh <version>)"
			if os.Getenv("CI") == "true" {
				t.Error(msg)
			} else {
				t.Log(msg)
			}
			continue
		}
		failed := 0
		var last string
		for range 50 {
			cmd := exec.Command("bash", "-c", "set -euo pipefail; "+tc.run)
			cmd.Dir = root
			out, err := cmd.CombinedOutput()
			if err != nil {
				failed++
				last = err.Error() + ": " + string(out)
			}
		}
		if failed > 0 {
			t.Errorf("%s `%s`: %d of 50 runs failed, last: %s", tc.file, tc.text, failed, last)
		} else {
			t.Logf("%s `%s`: 50 of 50 runs exited 0", tc.file, tc.text)
		}
	}
}

func lookPath(name string) string {
	p, err := exec.LookPath(name)
	if err != nil {
		return ""
	}
	return p
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
