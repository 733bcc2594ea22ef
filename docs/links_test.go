package docs

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// generated are the paths the build makes, which the docs name but the
// repository does not hold.
var generated = []string{"bin/hapsuper"}

// markdownFiles are the files the checker reads: README.md, docs/*.md and
// deploy/**/*.md, relative to the repository root.
func markdownFiles(t *testing.T, root string) []string {
	t.Helper()
	files := []string{"README.md"}
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range docs {
		files = append(files, "docs/"+filepath.Base(d))
	}
	err = filepath.WalkDir(filepath.Join(root, "deploy"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".md") {
			rel, _ := filepath.Rel(root, p)
			files = append(files, filepath.ToSlash(rel))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// Every relative link, every anchor and every repository path in a code
// span of the repository's Markdown exists.
func TestLinks(t *testing.T) {
	c := &Checker{Root: "..", Generated: generated}
	files := markdownFiles(t, "..")
	if len(files) < 10 {
		t.Fatalf("only %d Markdown files found: %v", len(files), files)
	}
	probs, err := c.Check(files)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range probs {
		t.Error(p)
	}
}

// Every page of docs/ is reachable from the README, directly or through
// other pages.
func TestDocsReachable(t *testing.T) {
	c := &Checker{Root: ".."}
	un, err := c.Unreachable()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range un {
		t.Errorf("%s: no link from README.md leads to it (list it in docs/README.md)", p)
	}
}

// The checker finds what it must in a small tree, and nothing else: a
// missing file, a missing anchor, a missing path in a code span, a page no
// link reaches; not URLs, absolute paths or slashed names that are no
// repository path.
func TestCheckerOnATree(t *testing.T) {
	root := t.TempDir()
	write := func(name, text string) {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("README.md", "# Title\n\n## The `status` command\n\n"+
		"See [a](docs/a.md#the-part), [gone](docs/gone.md), [bad anchor](docs/a.md#nope),\n"+
		"[self](#the-status-command), [web](https://example.com/x), `cmd/tool/main.go`, `cmd/missing.go`,\n"+
		"`kubernetes.io/service-name`, `/var/run/x`, `core/v1`, `docs/a.md#the-part`.\n\n"+
		"Built: `./bin/tool` (generated), `./bin/tool/x` (not generated).\n\n"+
		"```\n[in code](docs/fenced.md) `cmd/fenced.go`\n```\n\n    cd cmd/indented\n")
	write("docs/a.md", "# A\n\n## The part\n\n## The part\n\nBack to [the readme](../README.md), [twice](#the-part-1).\n")
	write("docs/orphan.md", "# Orphan\n")
	write("deploy/README.md", "`base/` and `base/x/` and [up](../README.md#title)\n")
	write("deploy/base/k.yaml", "")
	write("cmd/tool/main.go", "")
	c := &Checker{Root: root, Generated: []string{"bin/tool"}}
	probs, err := c.Check([]string{"README.md", "docs/a.md", "docs/orphan.md", "deploy/README.md"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range probs {
		got = append(got, p.String())
	}
	want := []string{
		"README.md:5: link docs/gone.md: docs/gone.md does not exist",
		"README.md:5: link docs/a.md#nope: docs/a.md has no heading #nope (it has a, the-part, the-part-1)",
		"README.md:6: path cmd/missing.go: cmd/missing.go does not exist",
		"README.md:9: path ./bin/tool/x: bin/tool/x does not exist",
		"deploy/README.md:1: path base/x/: deploy/base/x does not exist",
	}
	if !slices.Equal(got, want) {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	un, err := c.Unreachable()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(un, []string{"docs/orphan.md"}) {
		t.Errorf("unreachable: %v, want [docs/orphan.md]", un)
	}
}

func TestAnchors(t *testing.T) {
	got := Anchors("# hapsuper\n## `hapsuper status`\n### Kept-alive traffic: the quiet rule per routing state\n## Flags\n## Flags\n```\n# not a heading\n```\n#nospace\n")
	want := []string{"hapsuper", "hapsuper-status", "kept-alive-traffic-the-quiet-rule-per-routing-state", "flags", "flags-1"}
	if !slices.Equal(got, want) {
		t.Errorf("Anchors = %v, want %v", got, want)
	}
}
