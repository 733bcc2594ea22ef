package judge

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The judgement imports no network, process or Kubernetes client package:
// what it decides, it decides from the facts it is handed.
func TestNoIOImports(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{join .Imports "\n"}}`, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v: %s", err, out)
	}
	forbidden := []string{"net", "net/http", "os", "os/exec", "syscall", "log", "log/slog", "context", "k8s.io/utils/clock"}
	for imp := range strings.FieldsSeq(string(out)) {
		for _, f := range forbidden {
			if imp == f {
				t.Errorf("judge imports %s: I/O belongs to routing's shell", imp)
			}
		}
		if strings.HasPrefix(imp, "k8s.io/client-go") || strings.HasPrefix(imp, "k8s.io/apimachinery/pkg/watch") ||
			strings.HasPrefix(imp, "github.com/hapsuper/hapsuper/routing") && imp != "github.com/hapsuper/hapsuper/routing/judge" {
			t.Errorf("judge imports %s: the Kubernetes client and the observer are the shell's", imp)
		}
	}
	deps, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v: %s", err, deps)
	}
	for dep := range strings.FieldsSeq(string(deps)) {
		if strings.HasPrefix(dep, "k8s.io/client-go") || dep == "k8s.io/utils/clock" {
			t.Errorf("judge depends on %s", dep)
		}
	}
}

// The judgement reads no clock: every time it uses comes with the facts.
func TestNoClockReads(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	reads := map[string]bool{"Now": true, "Since": true, "Until": true, "After": true, "Sleep": true,
		"Tick": true, "NewTimer": true, "NewTicker": true, "AfterFunc": true}
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); ok && x.Name == "time" && reads[sel.Sel.Name] {
				t.Errorf("%s: time.%s: the judgement is handed its times", fset.Position(sel.Pos()), sel.Sel.Name)
			}
			return true
		})
	}
	if checked == 0 {
		t.Fatal("no source file checked")
	}
}
