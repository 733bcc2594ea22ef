package docs

import (
	"fmt"
	"os"
	"path"
	"regexp"
	"slices"
	"strings"
	"unicode"
)

// A Problem is one broken reference: the file and line that make it, and
// what is wrong.
type Problem struct {
	File string // relative to the repository root
	Line int
	Msg  string
}

func (p Problem) String() string { return fmt.Sprintf("%s:%d: %s", p.File, p.Line, p.Msg) }

var (
	// linkRE is an inline Markdown link or image: [text](target) with an
	// optional "title".
	linkRE = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	// codeRE is a code span on one line.
	codeRE = regexp.MustCompile("`([^`]+)`")
	// pathRE is what a repository path in a code span looks like: segments
	// of file-name characters joined by slashes, an optional trailing slash
	// and #anchor.
	pathRE = regexp.MustCompile(`^[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)+/?(#[a-z0-9_-]+)?$`)
)

// Checker checks the Markdown of the repository rooted at Root.
type Checker struct {
	Root string
	// Generated are paths the build makes: named, never committed.
	Generated []string

	anchors map[string][]string // file → its headings' anchors
}

// Check returns the broken links and paths in files (relative to Root).
func (c *Checker) Check(files []string) ([]Problem, error) {
	var probs []Problem
	for _, f := range files {
		b, err := os.ReadFile(path.Join(c.Root, f))
		if err != nil {
			return nil, err
		}
		for _, ref := range references(string(b)) {
			if msg := c.resolve(f, ref); msg != "" {
				probs = append(probs, Problem{File: f, Line: ref.line, Msg: msg})
			}
		}
	}
	return probs, nil
}

// A reference is a link target or a code span that names a path.
type reference struct {
	target string
	line   int
	code   bool // from a code span: only checked when it looks like a repository path
}

// references lists the links and code spans of a Markdown text outside its
// fenced code blocks.
func references(text string) []reference {
	var refs []reference
	fenced := false
	for i, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			fenced = !fenced
			continue
		}
		if fenced || strings.HasPrefix(l, "    ") {
			continue // a code block (commands, captured output)
		}
		for _, m := range linkRE.FindAllStringSubmatch(l, -1) {
			refs = append(refs, reference{target: m[1], line: i + 1})
		}
		for _, m := range codeRE.FindAllStringSubmatch(linkRE.ReplaceAllString(l, ""), -1) {
			refs = append(refs, reference{target: m[1], line: i + 1, code: true})
		}
	}
	return refs
}

// resolve returns what is wrong with ref in file, or "".
func (c *Checker) resolve(file string, ref reference) string {
	t := ref.target
	if ref.code {
		if !pathRE.MatchString(t) {
			return ""
		}
		// A code span is a repository path when its first segment names
		// an entry of the repository's root or of the file's directory;
		// "core/v1" or "kubernetes.io/service-name" are not.
		first, _, _ := strings.Cut(t, "/")
		switch {
		case c.exists(first):
			return c.target(file, t, "/", "path")
		case c.exists(path.Join(path.Dir(file), first)):
			return c.target(file, t, path.Dir(file), "path")
		}
		return ""
	}
	if strings.Contains(t, "://") || strings.HasPrefix(t, "mailto:") {
		return ""
	}
	return c.target(file, t, path.Dir(file), "link")
}

// target checks t, relative to dir ("/" is the root), with its anchor.
func (c *Checker) target(file, t, dir, kind string) string {
	p, anchor, _ := strings.Cut(t, "#")
	if p == "" {
		p = file
	} else {
		p = path.Join(dir, p)
		if strings.HasPrefix(p, "..") || path.IsAbs(p) && dir != "/" {
			return fmt.Sprintf("%s %s leaves the repository", kind, t)
		}
		p = strings.TrimPrefix(p, "/")
	}
	if !c.exists(p) && !slices.Contains(c.Generated, p) {
		return fmt.Sprintf("%s %s: %s does not exist", kind, t, p)
	}
	if anchor == "" {
		return ""
	}
	if !strings.HasSuffix(p, ".md") {
		return fmt.Sprintf("%s %s: an anchor in a file that is not Markdown", kind, t)
	}
	as, err := c.anchorsOf(p)
	if err != nil {
		return err.Error()
	}
	if !slices.Contains(as, anchor) {
		return fmt.Sprintf("%s %s: %s has no heading #%s (it has %s)", kind, t, p, anchor, strings.Join(as, ", "))
	}
	return ""
}

func (c *Checker) exists(p string) bool {
	_, err := os.Stat(path.Join(c.Root, p))
	return err == nil
}

func (c *Checker) anchorsOf(p string) ([]string, error) {
	if as, ok := c.anchors[p]; ok {
		return as, nil
	}
	b, err := os.ReadFile(path.Join(c.Root, p))
	if err != nil {
		return nil, err
	}
	as := Anchors(string(b))
	if c.anchors == nil {
		c.anchors = map[string][]string{}
	}
	c.anchors[p] = as
	return as, nil
}

// Anchors are the anchors GitHub gives a Markdown text's headings: lower
// case, punctuation dropped, spaces as hyphens, "-1", "-2"… for repeats.
func Anchors(text string) []string {
	var as []string
	seen := map[string]int{}
	fenced := false
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			fenced = !fenced
		}
		h := strings.TrimLeft(l, "#")
		if fenced || len(h) == len(l) || len(l)-len(h) > 6 || !strings.HasPrefix(h, " ") {
			continue
		}
		a := slug(strings.TrimSpace(h))
		if n := seen[a]; n > 0 {
			seen[a]++
			a = fmt.Sprintf("%s-%d", a, n)
		} else {
			seen[a] = 1
		}
		as = append(as, a)
	}
	return as
}

func slug(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}

// Unreachable returns the pages of docs/ that no chain of links from
// README.md reaches.
func (c *Checker) Unreachable() ([]string, error) {
	pages, err := c.DocPages()
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{"README.md": true}
	queue := []string{"README.md"}
	for len(queue) > 0 {
		f := queue[0]
		queue = queue[1:]
		b, err := os.ReadFile(path.Join(c.Root, f))
		if err != nil {
			return nil, err
		}
		for _, ref := range references(string(b)) {
			if ref.code || strings.Contains(ref.target, "://") {
				continue
			}
			p, _, _ := strings.Cut(ref.target, "#")
			if p == "" || !strings.HasSuffix(p, ".md") {
				continue
			}
			p = path.Join(path.Dir(f), p)
			if !seen[p] && c.exists(p) {
				seen[p] = true
				queue = append(queue, p)
			}
		}
	}
	var out []string
	for _, p := range pages {
		if !seen[p] {
			out = append(out, p)
		}
	}
	return out, nil
}

// DocPages are the Markdown files directly under docs/.
func (c *Checker) DocPages() ([]string, error) {
	es, err := os.ReadDir(path.Join(c.Root, "docs"))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range es {
		if !e.IsDir() && strings.HasSuffix(e.Name(), ".md") {
			out = append(out, "docs/"+e.Name())
		}
	}
	return out, nil
}
