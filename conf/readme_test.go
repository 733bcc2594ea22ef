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

// The README's flag table is the run flags' help in Markdown: a row per
// group (RunGroups), then one row per flag of that group, rendered here from
// the definitions, in help's order. A flag added, renamed, reworded or moved
// fails this test until the README says the same; the failure prints the
// rows to paste.
func TestREADMEFlagTable(t *testing.T) {
	readme, err := readmeFlagRows("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	group := ""
	for _, f := range RunFlags() {
		if f.Group != group {
			group = f.Group
			want = append(want, groupRow(group))
		}
		want = append(want, markdownRow(f))
	}
	if strings.Join(readme, "\n") != strings.Join(want, "\n") {
		for i := range max(len(readme), len(want)) {
			var got, w string
			if i < len(readme) {
				got = readme[i]
			}
			if i < len(want) {
				w = want[i]
			}
			if got != w {
				t.Errorf("README's flag table differs from the definitions at row %d:\n README: %s\n   want: %s", i+1, got, w)
				break
			}
		}
		t.Errorf("the table under ### Flags, as the definitions give it:\n%s", strings.Join(want, "\n"))
	}
}

// Every run flag is in one group of RunGroups, and every name there is a
// run flag; RunFlags lists them group by group, in the groups' order.
func TestRunGroups(t *testing.T) {
	flags := RunFlags()
	names := map[string]bool{}
	for _, f := range flags {
		names[f.Name] = true
		if f.Group == "" {
			t.Errorf("--%s is in no group of RunGroups: add it where help should list it", f.Name)
		}
	}
	i := 0
	for _, g := range RunGroups {
		for _, name := range g.Flags {
			if !names[name] {
				t.Errorf("RunGroups %q names --%s, which is no run flag", g.Title, name)
				continue
			}
			if i < len(flags) && (flags[i].Name != name || flags[i].Group != g.Title) {
				t.Errorf("RunFlags()[%d] is --%s of %q, want --%s of %q", i, flags[i].Name, flags[i].Group, name, g.Title)
			}
			i++
		}
	}
	if i != len(flags) {
		t.Errorf("RunGroups name %d flags, run has %d", i, len(flags))
	}
}

// A meaning that states a default "(default: …)" explains what an empty
// default stands for (none, off, in-cluster credentials): the default
// column or help's "default" shows it, taken out of the meaning, so that
// help says a default once. A flag whose default is a value says it there
// alone, so the two cannot disagree.
func TestFlagMeaningStatesNoOtherDefault(t *testing.T) {
	unset := 0
	for _, f := range RunFlags() {
		if strings.Contains(f.Meaning, "default:") {
			t.Errorf("--%s: its default is %q, and its meaning states one too: %q", f.Name, f.DefaultText(), f.Meaning)
		}
		if f.Unset != "" {
			unset++
		}
	}
	if unset == 0 {
		t.Error("no run flag says what its empty default stands for: the (default: …) notes moved?")
	}
}

// groupRow is a group's title as a row of the README's flag table.
func groupRow(title string) string { return "| **" + title + "** | | |" }

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
