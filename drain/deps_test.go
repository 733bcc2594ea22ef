package drain

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The drain imports only pure parts of the standard library: no I/O, no
// clock, and nothing of the project, routing's typed conditions included
// (it knows them by RoutingConditions).
func TestPureImports(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{join .Imports "\n"}}`, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v: %s", err, out)
	}
	allowed := map[string]bool{"fmt": true, "maps": true, "math": true, "math/bits": true, "slices": true, "sort": true, "strconv": true, "strings": true, "time": true}
	for imp := range strings.FieldsSeq(string(out)) {
		if !allowed[imp] {
			t.Errorf("drain imports %s: the supervisor does the I/O and hands the drain plain values", imp)
		}
	}
}

// Every time the drain uses comes with its inputs.
func TestNoClockRead(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	read := regexp.MustCompile(`\btime\.(Now|Since|Until|After|AfterFunc|Sleep|Tick|NewTimer|NewTicker)\b`)
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		for i, line := range strings.Split(string(src), "\n") {
			if m := read.FindString(line); m != "" && !strings.HasPrefix(strings.TrimSpace(line), "//") {
				t.Errorf("%s:%d: %s: the drain is handed its times", name, i+1, m)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no source file checked")
	}
}
