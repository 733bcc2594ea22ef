package conf

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The README's flag table is the run flags' help in Markdown: one row per
// flag, rendered here from the definitions, in any order. A flag added,
// renamed or reworded fails this test until the README says the same; the
// failure prints the row to paste.
func TestREADMEFlagTable(t *testing.T) {
	readme, err := readmeFlagRows("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{} // flag name → row
	for _, f := range RunFlags() {
		want[f.Name] = markdownRow(f)
	}
	seen := map[string]bool{}
	for _, row := range readme {
		name := rowFlagName(row)
		switch w, ok := want[name]; {
		case seen[name]:
			t.Errorf("README lists --%s twice", name)
		case !ok:
			t.Errorf("README lists a flag hapsuper run does not have:\n%s", row)
		case row != w:
			t.Errorf("README's row for --%s differs from the flag's definition:\n README: %s\n    want: %s", name, row, w)
		}
		seen[name] = true
	}
	for name, row := range want {
		if !seen[name] {
			t.Errorf("README lacks --%s; add under ### Flags:\n%s", name, row)
		}
	}
}

// A meaning that states a default "(default: …)" explains what an empty
// default stands for (none, off, in-cluster credentials); a flag whose
// default is a value says it in the default column alone, so the two
// cannot disagree.
func TestFlagMeaningStatesNoOtherDefault(t *testing.T) {
	for _, f := range RunFlags() {
		if strings.Contains(f.Meaning, "default:") && f.DefaultText() != "none" {
			t.Errorf("--%s: its default is %q, and its meaning states another: %q", f.Name, f.DefaultText(), f.Meaning)
		}
	}
}

// markdownRow is f as a row of the README's | flag | default | meaning |
// table: a default that is a value is code, "none" and rules are prose.
func markdownRow(f Flag) string {
	def := f.DefaultText()
	if f.Derived == "" && f.Default != "" {
		def = "`" + f.Default + "`"
	}
	cell := func(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
	return "| `--" + f.Name + "` | " + cell(def) + " | " + cell(f.Meaning) + " |"
}

// rowFlagName is the flag a table row is about: its first cell without the
// code marks and dashes.
func rowFlagName(row string) string {
	cells := strings.Split(row, "|")
	if len(cells) < 2 {
		return row
	}
	return strings.TrimLeft(strings.Trim(strings.TrimSpace(cells[1]), "`"), "-")
}

// readmeFlagRows returns the body rows of the first table under the
// "### Flags" heading, which must start with | flag | default | meaning |.
func readmeFlagRows(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var rows []string
	inSection, inTable := false, false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(line, "#"):
			if inTable || (inSection && line != "### Flags") {
				return checkRows(rows, path)
			}
			inSection = line == "### Flags"
		case !inSection:
		case !inTable && strings.HasPrefix(line, "|"):
			if line != "| flag | default | meaning |" {
				return nil, fmt.Errorf("%s: the table under ### Flags starts with %q, want | flag | default | meaning |", path, line)
			}
			inTable = true
		case inTable && strings.HasPrefix(line, "|---"):
		case inTable && strings.HasPrefix(line, "|"):
			rows = append(rows, line)
		case inTable:
			return checkRows(rows, path)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return checkRows(rows, path)
}

func checkRows(rows []string, path string) ([]string, error) {
	if len(rows) == 0 {
		return nil, fmt.Errorf("%s: no | flag | default | meaning | table under a ### Flags heading", path)
	}
	return rows, nil
}

// The manifests in deploy/ set hapsuper's flags by their variables: every
// HAPSUPER_ variable they name must be a run flag's, or the pod runs with a
// setting that nothing reads.
func TestDeployNamesFlagVariables(t *testing.T) {
	known := map[string]bool{}
	for _, f := range RunFlags() {
		known[f.Env] = true
	}
	re := regexp.MustCompile(`HAPSUPER_[A-Z][A-Z0-9_]*`)
	seen := 0
	err := filepath.WalkDir("../deploy", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".yaml") {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, v := range re.FindAllString(string(b), -1) {
			seen++
			if !known[v] {
				t.Errorf("%s sets %s, which is no flag's variable", path, v)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if seen == 0 {
		t.Fatal("no HAPSUPER_ variable found in deploy/: the manifests moved?")
	}
}
