package haproxy

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hapsuper/hapsuper/conf"
)

// The sections the override file may hold, in order, and the keywords each
// may use. Nothing else may appear in it.
var (
	overrideSections        = []string{"global"}
	overrideSectionsLBCheck = []string{"global", "defaults", "frontend " + LBCheck, "backend " + LBCheckBackend}
	overrideKeywords        = map[string][]string{
		"global":                    {"hard-stop-after"},
		"defaults":                  {"mode", "timeout"},
		"frontend " + LBCheck:       {"bind", "stick-table", "http-request"},
		"backend " + LBCheckBackend: {"server"},
	}
)

// FuzzOverride: for any --lb-check-bind and stop budget, the override
// writer either refuses (and then so does conf.Parse, with the same verdict)
// or writes exactly the sections hapsuper means to write: printable ASCII
// lines, each a comment before the first section, a section header of
// overrideSections, or an indented line with a keyword of its section; a
// `hard-stop-after <budget>ms` and, with the check, one `bind` of one
// address that conf.LBCheckAddr accepts.
//
// Seeds: the documented examples, and each kind of injection (a newline
// starting a `global` section with an admin stats socket, CR, TAB, `#`,
// `,`, a bind option, a zone, a name).
func FuzzOverride(f *testing.F) {
	for _, bind := range []string{"", ":8404", "*:8404", "127.0.0.1:8404", "[::1]:8404", "[fe80::1%eth0]:8404",
		"127.0.0.1:8404\nglobal\n    stats socket /tmp/admin.sock mode 666 level admin",
		"/run/lb.sock\nglobal\n\tstats\tsocket\t/tmp/a.sock\tmode\t666\tlevel\tadmin\nfrontend\tx\n\tbind\t127.0.0.1:8405", // tabs, no space
		":8404\r\nglobal", ":8404\tssl crt /etc/x.pem", ":8404 # c", "a,b:1", "localhost:8404", "[::1]:8404\n", ":0", ":65536"} {
		f.Add(bind, int64(28_000))
	}
	f.Add(":8404", int64(1))
	f.Add(":8404", int64(0))
	f.Fuzz(func(t *testing.T, bind string, budgetMs int64) {
		s := conf.Settings{GracePeriod: time.Duration(budgetMs) * time.Millisecond, LBCheckBind: bind}
		if bind != "" {
			s.LBCheckThreshold = 2
		}
		budgetMs = s.Budget().Milliseconds() // as it wraps around
		text, err := overrideText(s)
		_, addrErr := conf.LBCheckAddr(bind)
		var verr error
		if bind != "" {
			_, verr = conf.Parse([]string{"--lb-check-bind=" + bind, "--lb-check-threshold=2"}, nil)
		}
		if (bind != "" && addrErr != nil) != (verr != nil) {
			t.Fatalf("--lb-check-bind %q: LBCheckAddr says %v, Parse says %v", bind, addrErr, verr)
		}
		if err != nil {
			if (bind == "" || addrErr == nil) && budgetMs >= 1 {
				t.Fatalf("overrideText(bind %q, budget %dms) refused: %v", bind, budgetMs, err)
			}
			if budgetMs >= 1 && bind != "" && addrErr != nil && !strings.Contains(err.Error(), "--lb-check-bind") {
				t.Fatalf("overrideText(bind %q): error %q does not name --lb-check-bind", bind, err)
			}
			return
		}
		if budgetMs < 1 || (bind != "" && addrErr != nil) {
			t.Fatalf("overrideText(bind %q, budget %dms) wrote a file:\n%s", bind, budgetMs, text)
		}
		if err := checkOverrideText(text, budgetMs, bind != ""); err != nil {
			t.Fatalf("overrideText(bind %q, budget %dms): %v\n%s", bind, budgetMs, err, text)
		}
	})
}

// checkOverrideText parses text line by line as HAProxy would split it, and
// says what is not one of the lines hapsuper writes.
func checkOverrideText(text string, budgetMs int64, lbCheck bool) error {
	if !strings.HasPrefix(text, overrideMark) || !strings.HasSuffix(text, "\n") {
		return fmt.Errorf("does not begin with %q and end with a newline", overrideMark)
	}
	for i := 0; i < len(text); i++ {
		if c := text[i]; c != '\n' && (c < 0x20 || c > 0x7e) {
			return fmt.Errorf("byte %q at %d", c, i)
		}
	}
	wantSections := overrideSections
	if lbCheck {
		wantSections = overrideSectionsLBCheck
	}
	var sections []string
	var binds, stops int
	for _, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		switch {
		case strings.HasPrefix(line, "#"):
			continue // a comment line; HAProxy ignores it
		case !strings.HasPrefix(line, "    "):
			if !slices.Contains(wantSections, line) {
				return fmt.Errorf("section %q is not one of %q", line, wantSections)
			}
			sections = append(sections, line)
			continue
		case len(sections) == 0:
			return fmt.Errorf("line %q before any section", line)
		}
		fields := strings.Fields(line)
		section := sections[len(sections)-1]
		if !slices.Contains(overrideKeywords[section], fields[0]) {
			return fmt.Errorf("keyword %q in section %q, want one of %q", fields[0], section, overrideKeywords[section])
		}
		if strings.ContainsAny(line, "#\\$") || (fields[0] != "http-request" && strings.Contains(line, `"`)) {
			return fmt.Errorf("line %q holds a comment, escape, variable or quote", line)
		}
		switch fields[0] {
		case "bind":
			binds++
			if len(fields) != 2 {
				return fmt.Errorf("bind line %q has options", line)
			}
			if addr, err := conf.LBCheckAddr(fields[1]); err != nil || addr != fields[1] {
				return fmt.Errorf("bind address %q is not one LBCheckAddr writes: %q, %v", fields[1], addr, err)
			}
		case "hard-stop-after":
			stops++
			if want := strconv.FormatInt(budgetMs, 10) + "ms"; len(fields) != 2 || fields[1] != want {
				return fmt.Errorf("%q, want hard-stop-after %s", line, want)
			}
		}
	}
	if !slices.Equal(sections, wantSections) {
		return fmt.Errorf("sections %q, want %q", sections, wantSections)
	}
	if wantBinds := map[bool]int{false: 0, true: 1}[lbCheck]; binds != wantBinds || stops != 1 {
		return fmt.Errorf("%d bind lines and %d hard-stop-after, want %d and 1", binds, stops, wantBinds)
	}
	return nil
}
