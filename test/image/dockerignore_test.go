package image_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/moby/patternmatcher"
	"github.com/moby/patternmatcher/ignorefile"
)

// The build context after .dockerignore still holds every file `go build
// ./cmd/hapsuper` reads (the module's Go and embedded files, go.mod, go.sum),
// and leaves the tests out.
func TestDockerignoreKeepsTheBuild(t *testing.T) {
	f, err := os.Open(filepath.Join(root, ".dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	patterns, err := ignorefile.ReadAll(f)
	if err != nil {
		t.Fatalf("read .dockerignore: %v", err)
	}
	pm, err := patternmatcher.New(patterns)
	if err != nil {
		t.Fatalf("compile .dockerignore: %v", err)
	}
	ignored := func(p string) bool {
		m, err := pm.MatchesOrParentMatches(filepath.ToSlash(p))
		if err != nil {
			t.Fatalf("match %s against .dockerignore: %v", p, err)
		}
		return m
	}

	needed := append([]string{"go.mod", "go.sum"}, buildFiles(t)...)
	for _, p := range needed {
		if ignored(p) {
			t.Errorf(".dockerignore excludes %s, which go build ./cmd/hapsuper needs", p)
		}
	}
	for _, p := range []string{"test/image/dockerfile_test.go", "conf/settings_test.go", ".git/HEAD"} {
		if !ignored(p) {
			t.Errorf(".dockerignore keeps %s in the build context", p)
		}
	}
	t.Logf("%d files the build needs, none excluded", len(needed))
}

// buildFiles lists the module's files that building ./cmd/hapsuper for
// linux without cgo reads, relative to the module root.
func buildFiles(t *testing.T) []string {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-json=Dir,GoFiles,EmbedFiles,Module", "./cmd/hapsuper")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list ./cmd/hapsuper: %v\n%s", err, stderr.String())
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p struct {
			Dir                 string
			GoFiles, EmbedFiles []string
			Module              *struct{ Main bool }
		}
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decode go list output: %v", err)
		}
		if p.Module == nil || !p.Module.Main {
			continue
		}
		rel, err := filepath.Rel(abs, p.Dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range append(p.GoFiles, p.EmbedFiles...) {
			files = append(files, filepath.Join(rel, f))
		}
	}
	if len(files) == 0 {
		t.Fatal("go list found no file of the module in ./cmd/hapsuper's build")
	}
	return files
}
